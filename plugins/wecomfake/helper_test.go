package wecomfake_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/heraldhq/herald/plugins/wecomfake"
	"github.com/stretchr/testify/require"
)

var epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

type bundle struct {
	fake   *wecomfake.Server
	api    *httptest.Server
	admin  *httptest.Server
	client *http.Client
}

// setup starts the fake on loopback with a fixed clock (moved by Advance).
func setup(t *testing.T, cfg wecomfake.Config) *bundle {
	t.Helper()
	cfg.NowFunc = func() time.Time { return epoch }
	f := wecomfake.New(cfg)
	b := &bundle{fake: f, api: httptest.NewServer(f.Handler()), admin: httptest.NewServer(f.AdminHandler())}
	b.client = &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(func() {
		b.client.CloseIdleConnections()
		b.api.Close()
		b.admin.Close()
	})
	return b
}

// reply is a decoded API answer.
type reply struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (r reply) errcode() int {
	n, _ := r.body["errcode"].(float64)
	return int(n)
}

func (r reply) str(k string) string {
	s, _ := r.body[k].(string)
	return s
}

func (b *bundle) do(t *testing.T, method, path string, q url.Values, body string) reply {
	t.Helper()
	u := b.api.URL + path
	if q != nil {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequest(method, u, bytes.NewBufferString(body))
	require.NoError(t, err)
	resp, err := b.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func (b *bundle) token(t *testing.T) string {
	t.Helper()
	r := b.do(t, http.MethodGet, "/cgi-bin/gettoken", url.Values{"corpid": {wecomfake.DemoCorpID}, "corpsecret": {wecomfake.DemoSecret}}, "")
	require.Equal(t, 0, r.errcode(), string(r.raw))
	return r.str("access_token")
}

func (b *bundle) send(t *testing.T, tok, body string) reply {
	t.Helper()
	return b.do(t, http.MethodPost, "/cgi-bin/message/send", url.Values{"access_token": {tok}}, body)
}

func (b *bundle) adminDo(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, b.admin.URL+path, bytes.NewBufferString(body))
	require.NoError(t, err)
	resp, err := b.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, raw
}

func textTo(user, content string) string {
	b, _ := json.Marshal(map[string]any{"touser": user, "msgtype": "text", "agentid": wecomfake.DemoAgentID, "text": map[string]string{"content": content}})
	return string(b)
}
