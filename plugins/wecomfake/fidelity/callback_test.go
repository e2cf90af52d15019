package fidelity

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/silenceper/wechat/v2/cache"
	"github.com/silenceper/wechat/v2/util"
	"github.com/silenceper/wechat/v2/work"
	workconfig "github.com/silenceper/wechat/v2/work/config"
	"github.com/silenceper/wechat/v2/work/kf"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/wecom/callback"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

// The callback scheme checked against an independent implementation:
// silenceper/wechat's message crypto (util.EncryptMsg, util.DecryptMsg,
// util.Signature), which WeChat and WeCom users run in production.
const (
	cbToken  = "QDG6eK"
	cbAESKey = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	cbCorp   = wecomfake.DemoCorpID
)

func crypter(t *testing.T) *callback.Crypter {
	t.Helper()
	c, err := callback.New(cbToken, cbAESKey, cbCorp)
	require.NoError(t, err)
	return c
}

// TestCryptoAgainstSilenceper: what the library encrypts Herald decrypts,
// and the reverse; both sign alike.
func TestCryptoAgainstSilenceper(t *testing.T) {
	t.Parallel()
	c := crypter(t)
	msg := []byte("<xml><ToUserName><![CDATA[" + cbCorp + "]]></ToUserName><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[kf_msg_or_event]]></Event><Token><![CDATA[ENC1]]></Token><OpenKfId><![CDATA[wk1]]></OpenKfId><Content>客户咨询</Content></xml>")
	random := []byte("0123456789abcdef")

	theirs, err := util.EncryptMsg(random, msg, cbCorp, cbAESKey)
	require.NoError(t, err)
	got, err := c.Decrypt(string(theirs))
	require.NoError(t, err)
	require.Equal(t, msg, got, "Herald opens the library's ciphertext")

	ours, err := c.Encrypt(msg, bytes.NewReader(random))
	require.NoError(t, err)
	require.Equal(t, string(theirs), ours, "the same random prefix gives the same bytes")
	_, plain, err := util.DecryptMsg(cbCorp, ours, cbAESKey)
	require.NoError(t, err)
	require.Equal(t, msg, plain, "the library opens Herald's ciphertext")

	for _, n := range []int{0, 1, 11, 12, 31, 32, 33, 1000} { // padding at every length around the 32-byte block
		m := bytes.Repeat([]byte("x"), n)
		enc, err := util.EncryptMsg(random, m, cbCorp, cbAESKey)
		require.NoError(t, err)
		got, err := c.Decrypt(string(enc))
		require.NoError(t, err, "length %d", n)
		require.Equal(t, m, got)
	}

	require.Equal(t, util.Signature(cbToken, "1409659813", "1372623149", string(theirs)), c.Signature("1409659813", "1372623149", string(theirs)))
	_, _, err = util.DecryptMsg("wwother", ours, cbAESKey)
	require.Error(t, err, "the library checks the receiver id too")
	other, err := callback.New(cbToken, cbAESKey, "wwother")
	require.NoError(t, err)
	_, err = other.Decrypt(string(theirs))
	require.ErrorIs(t, err, callback.ErrBadReceiver)
}

// TestReceiverTakesTheLibrarysCallbacks: a callback built entirely by the
// library (encrypt, sign) is accepted by Herald's receiver; a bad
// signature is refused with 403; URL verification answers the echostr.
func TestReceiverTakesTheLibrarysCallbacks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []callback.Event
	h, err := callback.NewHandler(callback.HandlerConfig{Channels: map[string]*callback.Crypter{"wecom": crypter(t)},
		RecordFunc: func(_ context.Context, _ string, ev callback.Event) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, ev)
			return true, nil
		}})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/v1/wecom/callback/{channel}", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	inner := "<xml><ToUserName><![CDATA[" + cbCorp + "]]></ToUserName><FromUserName><![CDATA[zhangsan]]></FromUserName><CreateTime>1700000000</CreateTime>" +
		"<MsgType><![CDATA[event]]></MsgType><Event><![CDATA[template_card_event]]></Event><EventKey><![CDATA[done]]></EventKey>" +
		"<TaskId><![CDATA[follow-1]]></TaskId><CardType><![CDATA[button_interaction]]></CardType><ResponseCode><![CDATA[rc-1]]></ResponseCode><AgentID>1000002</AgentID></xml>"
	enc, err := util.EncryptMsg([]byte("fedcba9876543210"), []byte(inner), cbCorp, cbAESKey)
	require.NoError(t, err)
	post := func(sig string) int {
		q := url.Values{"msg_signature": {sig}, "timestamp": {"1700000000"}, "nonce": {"n0nce"}}
		body := "<xml><ToUserName><![CDATA[" + cbCorp + "]]></ToUserName><Encrypt><![CDATA[" + string(enc) + "]]></Encrypt><AgentID><![CDATA[1000002]]></AgentID></xml>"
		resp, err := http.Post(srv.URL+"/v1/wecom/callback/wecom?"+q.Encode(), "text/xml", strings.NewReader(body))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, post(util.Signature(cbToken, "1700000000", "n0nce", string(enc))))
	require.Len(t, got, 1)
	require.Equal(t, "wecom.template_card_event", got[0].Type)
	require.Contains(t, string(got[0].Data), `"ResponseCode":"rc-1"`)
	require.Equal(t, http.StatusForbidden, post(util.Signature("wrong-token", "1700000000", "n0nce", string(enc))), "a bad signature is refused")
	require.Len(t, got, 1)

	echo, err := util.EncryptMsg([]byte("fedcba9876543210"), []byte("5927782489442352469"), cbCorp, cbAESKey)
	require.NoError(t, err)
	q := url.Values{"msg_signature": {util.Signature(cbToken, "1", "n", string(echo))}, "timestamp": {"1"}, "nonce": {"n"}, "echostr": {string(echo)}}
	resp, err := http.Get(srv.URL + "/v1/wecom/callback/wecom?" + q.Encode())
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "5927782489442352469", string(b), "the echostr's plaintext alone")
}

// TestFakeCallbacksOpenWithTheLibrary: the fake's callbacks, checked and
// opened by the library (not by Herald's own code), and its kf/sync_msg
// read through the library's 微信客服 client.
func TestFakeCallbacksOpenWithTheLibrary(t *testing.T) {
	b := setup(t, wecomfake.Config{})
	var mu sync.Mutex
	var opened [][]byte
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env struct {
			Encrypt string `xml:"Encrypt"`
		}
		body, _ := io.ReadAll(r.Body)
		if xml.Unmarshal(body, &env) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		q := r.URL.Query()
		if util.Signature(cbToken, q.Get("timestamp"), q.Get("nonce"), env.Encrypt) != q.Get("msg_signature") {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		_, plain, err := util.DecryptMsg(cbCorp, env.Encrypt, cbAESKey)
		if err != nil {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		mu.Lock()
		opened = append(opened, plain)
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	require.NoError(t, b.fake.SetCallback(wecomfake.CallbackConfig{URL: recv.URL, Token: cbToken, AESKey: cbAESKey}))

	ctx := context.Background()
	res, err := b.fake.SendKfMessage(ctx, wecomfake.KfMessage{OpenKfID: "wk1", ExternalUserID: "c1", Text: "在吗"})
	require.NoError(t, err)
	require.Equal(t, []int{http.StatusOK}, res.Statuses)
	res, err = b.fake.SendKfMessage(ctx, wecomfake.KfMessage{OpenKfID: "wk1", ExternalUserID: "c1", Origin: 5, ServicerUserID: "alice", Text: "在的", CallbackFaults: wecomfake.CallbackFaults{BadSignature: true}})
	require.NoError(t, err)
	require.Equal(t, []int{http.StatusForbidden}, res.Statuses, "the library refuses the fake's bad signature too")
	_, err = b.fake.SendCardClick(ctx, wecomfake.CardClick{UserID: "alice", TaskID: "t1", EventKey: "done"})
	require.NoError(t, err)
	_, err = b.fake.SendContactChange(ctx, wecomfake.ContactChange{UserID: "alice", ExternalUserID: "wmC1"})
	require.NoError(t, err)
	require.Len(t, opened, 3)
	require.Contains(t, string(opened[0]), "kf_msg_or_event")
	require.Contains(t, string(opened[1]), "template_card_event")
	require.Contains(t, string(opened[2]), "change_external_contact")

	util.SetURIModifier(func(uri string) string {
		return strings.Replace(uri, "https://qyapi.weixin.qq.com", b.api.URL, 1)
	})
	t.Cleanup(func() {
		util.SetURIModifier(nil)
		http.DefaultClient.CloseIdleConnections()
	})
	wk := work.NewWork(&workconfig.Config{CorpID: cbCorp, CorpSecret: wecomfake.DemoSecret, AgentID: "1000002", Cache: cache.NewMemory()})
	kc, err := wk.GetKF()
	require.NoError(t, err)
	page, err := kc.SyncMsg(kf.SyncMsgOptions{OpenKfID: "wk1", Limit: 1})
	require.NoError(t, err)
	require.Len(t, page.MsgList, 1)
	require.Equal(t, uint32(1), page.HasMore)
	require.Equal(t, "c1", page.MsgList[0].ExternalUserID)
	require.Equal(t, uint32(3), page.MsgList[0].Origin)
	next, err := kc.SyncMsg(kf.SyncMsgOptions{OpenKfID: "wk1", Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Len(t, next.MsgList, 1)
	require.Equal(t, uint32(5), next.MsgList[0].Origin)
	// The library maps no servicer_userid; it keeps the message's JSON.
	require.Contains(t, string(next.MsgList[0].OriginData), `"servicer_userid":"alice"`)
	require.Equal(t, uint32(0), next.HasMore)
}
