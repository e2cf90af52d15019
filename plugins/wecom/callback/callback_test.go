package callback

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testKey  = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"
	testCorp = "ww1234567890abcdef"
)

func TestEncryptDecryptAndReceiver(t *testing.T) {
	t.Parallel()
	c, err := New("tok", testKey, testCorp)
	require.NoError(t, err)
	enc, err := c.Encrypt([]byte("<xml>hi</xml>"), rand.Reader)
	require.NoError(t, err)
	msg, err := c.Decrypt(enc)
	require.NoError(t, err)
	require.Equal(t, "<xml>hi</xml>", string(msg))

	other, err := New("tok", testKey, "wwother")
	require.NoError(t, err)
	_, err = other.Decrypt(enc)
	require.ErrorIs(t, err, ErrBadReceiver)
	_, err = c.Decrypt("not base64!")
	require.ErrorIs(t, err, ErrBadCipher)
	_, err = New("tok", "short", testCorp)
	require.ErrorIs(t, err, ErrBadKey)

	sig := c.Signature("1700000000", "n1", enc)
	require.NoError(t, c.Verify(sig, "1700000000", "n1", enc))
	require.ErrorIs(t, c.Verify(sig, "1700000001", "n1", enc), ErrBadSignature)
}

func TestFieldsAndEventIDs(t *testing.T) {
	t.Parallel()
	msg := `<xml><ToUserName><![CDATA[ww1]]></ToUserName><FromUserName><![CDATA[zhangsan]]></FromUserName><CreateTime>1700000000</CreateTime>` +
		`<MsgType><![CDATA[event]]></MsgType><Event><![CDATA[template_card_event]]></Event><EventKey><![CDATA[done]]></EventKey>` +
		`<TaskId><![CDATA[t1]]></TaskId><CardType><![CDATA[button_interaction]]></CardType><ResponseCode><![CDATA[rc1]]></ResponseCode>` +
		`<SelectedItems><SelectedItem><QuestionKey>q</QuestionKey></SelectedItem></SelectedItems></xml>`
	f, err := Fields([]byte(msg))
	require.NoError(t, err)
	require.Equal(t, "zhangsan", f["FromUserName"])
	require.Equal(t, "rc1", f["ResponseCode"])
	require.Contains(t, f["SelectedItems"], "QuestionKey")
	ev := ToEvent("wecom", f)
	require.Equal(t, "wecom.template_card_event", ev.Type)
	again := ToEvent("wecom", f)
	require.Equal(t, ev.ID, again.ID, "the same callback is the same event")
	f["ResponseCode"] = "rc2"
	require.NotEqual(t, ev.ID, ToEvent("wecom", f).ID, "another click is another event")

	_, err = Fields([]byte("not xml"))
	require.ErrorIs(t, err, ErrBadXML)
}

// TestHandler: URL verification, an event recorded once however often it
// comes, and a bad signature refused with 403 and counted.
func TestHandler(t *testing.T) {
	t.Parallel()
	c, err := New("tok", testKey, testCorp)
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[string]int{}
	reg := prometheus.NewRegistry()
	h, err := NewHandler(HandlerConfig{Channels: map[string]*Crypter{"wecom": c}, Registerer: reg,
		RecordFunc: func(_ context.Context, _ string, ev Event) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			seen[ev.ID]++
			return seen[ev.ID] == 1, nil
		}})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/v1/wecom/callback/{channel}", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	echo, err := c.Encrypt([]byte("echo-123"), rand.Reader)
	require.NoError(t, err)
	q := url.Values{"msg_signature": {c.Signature("1", "n", echo)}, "timestamp": {"1"}, "nonce": {"n"}, "echostr": {echo}}
	resp, err := http.Get(srv.URL + "/v1/wecom/callback/wecom?" + q.Encode())
	require.NoError(t, err)
	body := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "echo-123", body)

	inner := `<xml><ToUserName><![CDATA[ww1]]></ToUserName><CreateTime>1</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[kf_msg_or_event]]></Event><Token><![CDATA[T]]></Token><OpenKfId><![CDATA[wk1]]></OpenKfId></xml>`
	post := func(sigOK bool) int {
		enc, err := c.Encrypt([]byte(inner), rand.Reader)
		require.NoError(t, err)
		sig := c.Signature("2", "m", enc)
		if !sigOK {
			sig = strings.Repeat("0", 40)
		}
		q := url.Values{"msg_signature": {sig}, "timestamp": {"2"}, "nonce": {"m"}}
		resp, err := http.Post(srv.URL+"/v1/wecom/callback/wecom?"+q.Encode(), "text/xml",
			strings.NewReader(fmt.Sprintf("<xml><ToUserName><![CDATA[%s]]></ToUserName><Encrypt><![CDATA[%s]]></Encrypt><AgentID>1</AgentID></xml>", testCorp, enc)))
		require.NoError(t, err)
		readAll(t, resp)
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, post(true))
	require.Equal(t, http.StatusOK, post(true), "a retry (encrypted afresh) is answered and is the same event")
	require.Len(t, seen, 1)
	require.Equal(t, http.StatusForbidden, post(false))
	require.InDelta(t, 1, testutil.ToFloat64(h.refused.WithLabelValues("wecom", "signature")), 0)
	require.InDelta(t, 1, testutil.ToFloat64(h.received.WithLabelValues("wecom", "duplicate")), 0)

	resp, err = http.Get(srv.URL + "/v1/wecom/callback/nope?" + q.Encode())
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
