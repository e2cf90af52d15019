package wecomfake_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/plugins/wecomfake"
	"github.com/stretchr/testify/require"
)

func TestFaultErrcodeAndHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, wecomfake.Config{})
	tok := b.token(t)
	require.NoError(t, b.fake.FailNext(2, -1, "message/send"))
	require.Equal(t, -1, b.send(t, tok, textTo("alice", "a")).errcode())
	b.token(t) // gettoken is not hit by a fault on message/send
	require.Equal(t, -1, b.send(t, tok, textTo("alice", "b")).errcode())
	require.Equal(t, 0, b.send(t, tok, textTo("alice", "c")).errcode())
	require.Empty(t, b.fake.Faults(), "a counted fault is spent")

	require.NoError(t, b.fake.AddFault(wecomfake.Fault{Kind: wecomfake.FaultHTTP, Code: 503, Count: 1}))
	r := b.send(t, tok, textTo("alice", "d"))
	require.Equal(t, 503, r.status)
	require.Contains(t, string(r.raw), "<html>")

	require.NoError(t, b.fake.AddFault(wecomfake.Fault{Kind: wecomfake.FaultMalformed, Count: 1}))
	r = b.send(t, tok, textTo("alice", "e"))
	require.Equal(t, 200, r.status)
	require.False(t, json.Valid(r.raw))

	got := b.fake.Received("alice")
	require.Len(t, got, 1, "faults that answer do not deliver")
	require.Equal(t, "c", got[0].Content)

	require.ErrorIs(t, b.fake.AddFault(wecomfake.Fault{Kind: "explode"}), wecomfake.ErrBadFault)
	require.ErrorIs(t, b.fake.AddFault(wecomfake.Fault{Kind: wecomfake.FaultErrcode}), wecomfake.ErrBadFault)
	require.ErrorIs(t, b.fake.AddFault(wecomfake.Fault{Kind: wecomfake.FaultReset, Probability: 2}), wecomfake.ErrBadFault)
}

func TestFaultResetDeliversAbortDoesNot(t *testing.T) {
	t.Parallel()
	b := setup(t, wecomfake.Config{})
	tok := b.token(t)
	post := func(content string) error {
		resp, err := b.client.Post(b.api.URL+"/cgi-bin/message/send?access_token="+tok, "application/json", strings.NewReader(textTo("bob", content)))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	require.NoError(t, b.fake.AddFault(wecomfake.Fault{Kind: wecomfake.FaultReset, Count: 1, Path: wecomfake.PathSend}))
	require.Error(t, post("reset"), "the client sees no reply")
	require.NoError(t, b.fake.AddFault(wecomfake.Fault{Kind: wecomfake.FaultAbort, Count: 1}))
	require.Error(t, post("abort"))
	require.NoError(t, post("fine"))

	var got []string
	for _, m := range b.fake.Received("bob") {
		got = append(got, m.Content)
	}
	require.Equal(t, []string{"reset", "fine"}, got)
	calls := b.fake.Requests()
	require.Equal(t, 0, calls[1].Status, "a reset call has no status")
}

func TestFaultProbabilityIsSeeded(t *testing.T) {
	t.Parallel()
	hits := func() int {
		b := setup(t, wecomfake.Config{Seed: 7})
		tok := b.token(t)
		require.NoError(t, b.fake.AddFault(wecomfake.Fault{Kind: wecomfake.FaultErrcode, Code: 45009, Probability: 0.3, Path: "message/send"}))
		n := 0
		for i := range 200 {
			if b.send(t, tok, textTo(fmt.Sprintf("u%d", i), "x")).errcode() == 45009 {
				n++
			}
		}
		return n
	}
	n := hits()
	require.InDelta(t, 60, n, 25)
	require.Equal(t, n, hits(), "the same seed draws the same hits")
}

func TestLatency(t *testing.T) {
	t.Parallel()
	b := setup(t, wecomfake.Config{})
	b.fake.SetLatency(5 * time.Second)
	c := &http.Client{Timeout: 50 * time.Millisecond, Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	_, err := c.Get(b.api.URL + "/cgi-bin/gettoken?corpid=x&corpsecret=y")
	require.Error(t, err)
	b.fake.SetLatency(0)
	b.token(t)
}

func TestRobot(t *testing.T) {
	t.Parallel()
	cfg := wecomfake.Config{Corps: []wecomfake.CorpConfig{{ID: "ww1", Robots: []wecomfake.RobotConfig{{Key: "k1"}, {Key: "off", Disabled: true}}}}}
	b := setup(t, cfg)
	post := func(key, body string) reply {
		return b.do(t, http.MethodPost, "/cgi-bin/webhook/send", url.Values{"key": {key}}, body)
	}
	text := func(c string) string { return `{"msgtype":"text","text":{"content":"` + c + `"}}` }
	require.Equal(t, 93000, post("", text("a")).errcode())
	require.Equal(t, 93000, post("nope", text("a")).errcode())
	require.Equal(t, 93004, post("off", text("a")).errcode())
	require.Equal(t, 40058, post("k1", "{").errcode())
	require.Equal(t, 40008, post("k1", `{"msgtype":"fax"}`).errcode())
	require.Equal(t, 44004, post("k1", text("")).errcode())
	require.Equal(t, 40058, post("k1", text(strings.Repeat("x", 2049))).errcode())
	require.Equal(t, 0, post("k1", `{"msgtype":"markdown","markdown":{"content":"`+strings.Repeat("x", 4096)+`"}}`).errcode())
	for i := range 19 {
		r := post("k1", text(fmt.Sprint(i)))
		require.Equal(t, 0, r.errcode())
		require.NotContains(t, r.body, "msgid", "robot replies carry no msgid")
	}
	require.Equal(t, 45009, post("k1", text("21st")).errcode())
	b.fake.Advance(time.Minute)
	require.Equal(t, 0, post("k1", text("next minute")).errcode())
	require.Len(t, b.fake.RobotReceived("k1"), 21)
	require.Empty(t, b.fake.Received(""))
}

func TestAdminHandler(t *testing.T) {
	t.Parallel()
	b := setup(t, wecomfake.Config{})
	tok := b.token(t)

	st, raw := b.adminDo(t, http.MethodPost, "/faults", `{"kind":"errcode","code":45009,"count":1,"path":"message/send"}`)
	require.Equal(t, 200, st, string(raw))
	require.Equal(t, 45009, b.send(t, tok, textTo("alice", "a")).errcode())
	st, raw = b.adminDo(t, http.MethodPost, "/faults", `{"kind":"nope"}`)
	require.Equal(t, 400, st)
	require.Contains(t, string(raw), "unknown kind")
	st, _ = b.adminDo(t, http.MethodPost, "/faults", `{"kind":"reset","no_such_knob":0.5}`)
	require.Equal(t, 400, st, "unknown fields are refused, not ignored")

	st, raw = b.adminDo(t, http.MethodPost, "/tokens/revoke", ``)
	require.Equal(t, 200, st)
	require.JSONEq(t, `{"revoked":1}`, string(raw))
	require.Equal(t, 40014, b.send(t, tok, textTo("alice", "b")).errcode())

	tok = b.token(t)
	require.Equal(t, 0, b.send(t, tok, textTo("alice", "c")).errcode())
	st, raw = b.adminDo(t, http.MethodGet, "/received?userid=Alice", "")
	require.Equal(t, 200, st)
	var msgs []wecomfake.Msg
	require.NoError(t, json.Unmarshal(raw, &msgs))
	require.Len(t, msgs, 1)
	require.Equal(t, "c", msgs[0].Content)

	st, raw = b.adminDo(t, http.MethodGet, "/calls?path=gettoken", "")
	require.Equal(t, 200, st)
	var calls struct{ Count int }
	require.NoError(t, json.Unmarshal(raw, &calls))
	require.Equal(t, 2, calls.Count)

	st, _ = b.adminDo(t, http.MethodPost, "/settings", `{"token_lifetime":"1m","token_mode":"rotate"}`)
	require.Equal(t, 200, st)
	st, _ = b.adminDo(t, http.MethodPost, "/settings", `{"token_mode":"wobbly"}`)
	require.Equal(t, 400, st)
	st, _ = b.adminDo(t, http.MethodPost, "/clock/advance", `{"by":"later"}`)
	require.Equal(t, 400, st)
	st, _ = b.adminDo(t, http.MethodPost, "/clock/advance", `{"by":"2h"}`)
	require.Equal(t, 200, st)
	require.Equal(t, 42001, b.send(t, tok, textTo("alice", "d")).errcode())

	st, raw = b.adminDo(t, http.MethodGet, "/drops", "")
	require.Equal(t, 200, st)
	require.JSONEq(t, `[]`, string(raw))
	st, _ = b.adminDo(t, http.MethodPost, "/reset", "")
	require.Equal(t, 200, st)
	require.Zero(t, b.fake.Calls("gettoken"))
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	cfg, err := wecomfake.ParseConfig([]byte(`
token_lifetime: 90s
token_mode: rotate
corps:
  - id: ww1
    apps: [{agent_id: 5, secret: s5, trusted_ips: [127.0.0.1]}]
    members: [{userid: Zed, departments: [3]}]
    departments: [{id: 3, name: Ops}]
    tags: [{id: 9, userids: [zed]}]
    robots: [{key: rk}]
`))
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, cfg.TokenLifetime)
	require.Equal(t, wecomfake.TokenRotate, cfg.TokenMode)
	require.Equal(t, "Zed", cfg.Corps[0].Members[0].UserID)

	_, err = wecomfake.ParseConfig([]byte(`{"corps":[{"id":"a","apps":[{"agent_id":1,"secret":"s"}]}],"token_lifetime":"1h"}`))
	require.NoError(t, err, "JSON works too")

	for _, bad := range []string{
		`corps: [{id: ""}]`,
		`corps: [{id: a}, {id: a}]`,
		`corps: [{id: a, apps: [{agent_id: 1}]}]`,
		`corps: [{id: a, members: [{userid: x}, {userid: X}]}]`,
		`token_mode: wobbly`,
		`token_lifetime: forever`,
		`[`,
	} {
		_, err := wecomfake.ParseConfig([]byte(bad))
		require.ErrorIs(t, err, wecomfake.ErrBadConfig, bad)
	}
}
