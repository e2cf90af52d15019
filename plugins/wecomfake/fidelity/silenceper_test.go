package fidelity

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/silenceper/wechat/v2/cache"
	"github.com/silenceper/wechat/v2/util"
	"github.com/silenceper/wechat/v2/work"
	workconfig "github.com/silenceper/wechat/v2/work/config"
	"github.com/silenceper/wechat/v2/work/message"
	"github.com/silenceper/wechat/v2/work/robot"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/wecomfake"
)

type bundle struct {
	fake *wecomfake.Server
	api  *httptest.Server
}

// setup starts the fake on loopback with a fixed clock.
func setup(t *testing.T, cfg wecomfake.Config) *bundle {
	t.Helper()
	epoch := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	cfg.NowFunc = func() time.Time { return epoch }
	f := wecomfake.New(cfg)
	b := &bundle{fake: f, api: httptest.NewServer(f.Handler())}
	t.Cleanup(b.api.Close)
	return b
}

// TestSilenceperClient drives a widely used open-source WeCom client through
// the fake: it fetches a token, sends an app message (with agentid as a
// string and empty toparty/totag, as it does) and posts through a robot.
// The library's URLs are fixed to WeCom's host, so its URI hook points them
// at the fake. Not parallel: the hook is a package global of the library.
func TestSilenceperClient(t *testing.T) {
	b := setup(t, wecomfake.Config{})
	util.SetURIModifier(func(uri string) string {
		return strings.Replace(uri, "https://qyapi.weixin.qq.com", b.api.URL, 1)
	})
	t.Cleanup(func() {
		util.SetURIModifier(nil)
		http.DefaultClient.CloseIdleConnections()
	})

	wk := work.NewWork(&workconfig.Config{
		CorpID:     wecomfake.DemoCorpID,
		CorpSecret: wecomfake.DemoSecret,
		AgentID:    "1000002",
		Cache:      cache.NewMemory(),
	})
	tok, err := wk.GetContext().GetAccessToken()
	require.NoError(t, err)
	require.Equal(t, b.fake.Token(wecomfake.DemoCorpID, wecomfake.DemoAgentID), tok)

	msgs := wk.GetMessage()
	resp, err := msgs.SendText(message.SendTextRequest{
		SendRequestCommon: &message.SendRequestCommon{ToUser: "alice|ghost", AgentID: "1000002"},
		Text:              message.TextField{Content: "hello from silenceper"},
	})
	require.NoError(t, err)
	require.Equal(t, int64(0), resp.ErrCode)
	require.Equal(t, "ghost", resp.InvalidUser)
	require.NotEmpty(t, resp.MsgID)

	_, err = msgs.SendText(message.SendTextRequest{
		SendRequestCommon: &message.SendRequestCommon{ToUser: "nobody", AgentID: "1000002"},
		Text:              message.TextField{Content: "lost"},
	})
	require.ErrorContains(t, err, "81013", "the library surfaces WeCom errors from the fake")

	opt := robot.WebhookSendTextOption{MsgType: "text"}
	opt.Text.Content = "robot hello"
	info, err := wk.GetRobot().RobotBroadcast(wecomfake.DemoRobotKey, opt)
	require.NoError(t, err)
	require.Equal(t, int64(0), info.ErrCode)

	got := b.fake.Received("alice")
	require.Len(t, got, 1)
	require.Equal(t, "hello from silenceper", got[0].Content)
	require.Len(t, b.fake.RobotReceived(wecomfake.DemoRobotKey), 1)
	require.Equal(t, 1, b.fake.Calls("gettoken"), "the library cached the token")
}
