package wecomfake_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/plugins/wecomfake"
	"github.com/stretchr/testify/require"
)

// twoCorps is the demo corp plus a second app (trusted IPs elsewhere) and a
// second corp.
func twoCorps() wecomfake.Config {
	demo := wecomfake.DemoCorp()
	demo.Apps = append(demo.Apps,
		wecomfake.AppConfig{AgentID: 1000003, Secret: "second-secret"},
		wecomfake.AppConfig{AgentID: 1000004, Secret: "fenced-secret", TrustedIPs: []string{"192.0.2.1"}},
	)
	demo.Members = append(demo.Members,
		wecomfake.MemberConfig{UserID: "Hidden1", Hidden: true},
		wecomfake.MemberConfig{UserID: "nolicence", Unlicensed: true},
	)
	other := wecomfake.CorpConfig{ID: "wwother", Apps: []wecomfake.AppConfig{{AgentID: 1000002, Secret: "other-secret"}}}
	return wecomfake.Config{Corps: []wecomfake.CorpConfig{demo, other}}
}

func TestGetTokenChecksInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, twoCorps())
	get := func(corp, secret string) reply {
		q := url.Values{}
		if corp != "" {
			q.Set("corpid", corp)
		}
		if secret != "" {
			q.Set("corpsecret", secret)
		}
		return b.do(t, http.MethodGet, "/cgi-bin/gettoken", q, "")
	}
	require.Equal(t, 41002, get("", "x").errcode())
	require.Equal(t, 41004, get(wecomfake.DemoCorpID, "").errcode())
	require.Equal(t, 40013, get("wwnope", "x").errcode())
	require.Equal(t, 40001, get(wecomfake.DemoCorpID, "wrong").errcode())
	require.Equal(t, 40091, get(wecomfake.DemoCorpID, "other-secret").errcode())
	require.NoError(t, b.fake.SetAppEnabled(wecomfake.DemoCorpID, 1000003, false))
	require.Equal(t, 40001, get(wecomfake.DemoCorpID, "second-secret").errcode())

	r := get(wecomfake.DemoCorpID, wecomfake.DemoSecret)
	require.Equal(t, 0, r.errcode())
	require.Equal(t, "ok", r.str("errmsg"))
	require.EqualValues(t, 7200, r.body["expires_in"])
	require.NotEmpty(t, r.str("access_token"))
	require.LessOrEqual(t, len(r.str("access_token")), 512)
	require.Equal(t, 7, b.fake.Calls("gettoken"))
}

func TestTokenModes(t *testing.T) {
	t.Parallel()
	b := setup(t, wecomfake.Config{})
	first := b.token(t)
	b.fake.Advance(time.Hour)
	require.Equal(t, first, b.token(t), "sticky mode hands out the live token again")
	r := b.do(t, http.MethodGet, "/cgi-bin/gettoken", url.Values{"corpid": {wecomfake.DemoCorpID}, "corpsecret": {wecomfake.DemoSecret}}, "")
	require.EqualValues(t, 3600, r.body["expires_in"], "sticky reply counts down")

	require.NoError(t, b.fake.SetTokenMode(wecomfake.TokenRotate))
	second := b.token(t)
	require.NotEqual(t, first, second)
	require.Equal(t, 0, b.send(t, first, textTo("alice", "old token still valid")).errcode())

	require.Equal(t, 2, b.fake.RevokeTokens(wecomfake.DemoCorpID, 0))
	require.Equal(t, 40014, b.send(t, second, textTo("alice", "revoked")).errcode())

	b.fake.SetTokenLifetime(time.Minute)
	third := b.token(t)
	b.fake.Advance(time.Minute)
	require.Equal(t, 42001, b.send(t, third, textTo("alice", "expired")).errcode())
}

func TestSendChecksInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, twoCorps())
	tok := b.token(t)
	fenced := b.do(t, http.MethodGet, "/cgi-bin/gettoken", url.Values{"corpid": {wecomfake.DemoCorpID}, "corpsecret": {"fenced-secret"}}, "").str("access_token")
	big := strings.Repeat("x", 9000)
	many := func(n int, prefix string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf("%s%d", prefix, i+1)
		}
		return strings.Join(parts, "|")
	}
	cases := []struct {
		name string
		tok  string
		body string
		want int
	}{
		{"no token", "", textTo("alice", "hi"), 41001},
		{"unknown token", "nope", textTo("alice", "hi"), 40014},
		{"untrusted ip before JSON", fenced, `not json`, 60020},
		{"bad JSON", tok, `{"touser":`, 40058},
		{"agentid missing", tok, `{"touser":"alice","msgtype":"text","text":{"content":"hi"}}`, 41011},
		{"agentid unknown", tok, `{"touser":"alice","msgtype":"text","agentid":7,"text":{"content":"hi"}}`, 40056},
		{"agentid of another app", tok, `{"touser":"alice","msgtype":"text","agentid":1000003,"text":{"content":"hi"}}`, 301002},
		{"bad msgtype", tok, `{"touser":"alice","msgtype":"fax","agentid":1000002}`, 40008},
		{"empty content", tok, `{"touser":"alice","msgtype":"text","agentid":1000002,"text":{"content":""}}`, 44004},
		{"no body object", tok, `{"touser":"alice","msgtype":"markdown","agentid":1000002}`, 44004},
		{"no recipients", tok, `{"msgtype":"text","agentid":1000002,"text":{"content":"hi"}}`, 82001},
		{"too many users", tok, `{"touser":"` + many(1001, "u") + `","msgtype":"text","agentid":1000002,"text":{"content":"hi"}}`, 40032},
		{"too many parties", tok, `{"toparty":"` + many(101, "") + `","msgtype":"text","agentid":1000002,"text":{"content":"hi"}}`, 82002},
		{"too many tags", tok, `{"totag":"` + many(101, "") + `","msgtype":"text","agentid":1000002,"text":{"content":"hi"}}`, 82003},
		{"past the hard cap", tok, textTo("ghost", big), 45002},
		{"textcard title too long", tok, `{"touser":"alice","msgtype":"textcard","agentid":1000002,"textcard":{"title":"` + strings.Repeat("t", 129) + `","description":"d","url":"u"}}`, 40058},
		{"all invalid", tok, textTo("ghost|hidden1", "hi"), 81013},
		{"news with safe", tok, `{"touser":"alice","msgtype":"news","agentid":1000002,"safe":1,"news":{"articles":[{"title":"a"}]}}`, 40074},
	}
	for _, c := range cases {
		r := b.send(t, c.tok, c.body)
		require.Equal(t, http.StatusOK, r.status, c.name)
		require.Equal(t, c.want, r.errcode(), "%s: %s", c.name, r.raw)
	}
	require.NoError(t, b.fake.SetAppEnabled(wecomfake.DemoCorpID, wecomfake.DemoAgentID, false))
	require.Equal(t, 50003, b.send(t, tok, textTo("alice", "hi")).errcode())
	require.Empty(t, b.fake.Messages())
}

func TestSendDeliversAndReportsInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, twoCorps())
	tok := b.token(t)

	r := b.send(t, tok, `{"touser":"ALICE|Ghost|nolicence","toparty":"2|99","totag":"1|77","msgtype":"text","agentid":"1000002","text":{"content":"<b>&</b>"}}`)
	require.Equal(t, 0, r.errcode(), string(r.raw))
	require.Equal(t, "ghost", r.str("invaliduser"), "invalid users are lower-cased")
	require.Equal(t, "99", r.str("invalidparty"))
	require.Equal(t, "77", r.str("invalidtag"))
	require.Equal(t, "nolicence", r.str("unlicenseduser"))
	require.NotEmpty(t, r.str("msgid"))
	// touser alice, department 2 (bob, dave, frank, heidi), tag 1 (alice, dave).
	for _, u := range []string{"alice", "bob", "dave", "frank", "heidi"} {
		got := b.fake.Received(u)
		require.Len(t, got, 1, u)
		require.Equal(t, "<b>&</b>", got[0].Content)
		require.Equal(t, r.str("msgid"), got[0].MsgID)
	}
	require.Empty(t, b.fake.Received("carol"))
	require.Empty(t, b.fake.Received("nolicence"))

	long := strings.Repeat("é", 1500) // 3000 bytes
	r = b.send(t, tok, textTo("carol", long))
	require.Equal(t, 0, r.errcode())
	got := b.fake.Received("carol")
	require.Len(t, got, 1)
	require.True(t, got[0].Truncated)
	require.Equal(t, strings.Repeat("é", 1024), got[0].Content, "cut to 2048 bytes on a rune boundary")
}

func TestReplyFormat(t *testing.T) {
	t.Parallel()
	b := setup(t, wecomfake.Config{})
	r := b.send(t, "nope", textTo("alice", "hi"))
	require.Equal(t, "40014", r.header.Get("Error-Code"))
	require.Equal(t, "invalid access_token", r.header.Get("Error-Msg"))
	require.Regexp(t, `^invalid access_token, hint: \[\d+_\d+_[0-9a-f]{8}\], from ip: 127\.0\.0\.1, more info at https://open\.work\.weixin\.qq\.com/devtool/query\?e=40014$`, r.str("errmsg"))
	require.True(t, strings.HasPrefix(string(r.raw), `{"errcode":40014,"errmsg":`), string(r.raw))

	nf := b.do(t, http.MethodGet, "/cgi-bin/user/get", nil, "")
	require.Equal(t, http.StatusNotFound, nf.status)
	require.Empty(t, nf.raw)

	bare := setup(t, wecomfake.Config{ErrmsgStyle: wecomfake.ErrmsgBare})
	require.Equal(t, "invalid access_token", bare.send(t, "nope", textTo("alice", "hi")).str("errmsg"))
}

func TestDuplicateCheck(t *testing.T) {
	t.Parallel()
	b := setup(t, wecomfake.Config{})
	tok := b.token(t)
	body := `{"touser":"alice","msgtype":"text","agentid":1000002,"text":{"content":"report"},"enable_duplicate_check":1,"duplicate_check_interval":600}`
	first := b.send(t, tok, body)
	require.Equal(t, 0, first.errcode())
	again := b.send(t, tok, body)
	require.Equal(t, 0, again.errcode())
	require.Equal(t, first.str("msgid"), again.str("msgid"))
	require.Len(t, b.fake.Received("alice"), 1)
	drops := b.fake.Drops()
	require.Len(t, drops, 1)
	require.Equal(t, wecomfake.DropDuplicate, drops[0].Reason)

	// A body that differs by a byte is another message.
	require.Equal(t, 0, b.send(t, tok, strings.Replace(body, "report", "report!", 1)).errcode())
	require.Len(t, b.fake.Received("alice"), 2)
	// Past the interval the same body is delivered again.
	b.fake.Advance(601 * time.Second)
	require.Equal(t, 0, b.send(t, tok, body).errcode())
	require.Len(t, b.fake.Received("alice"), 3)
	// Without the check, identical bodies are delivered each time.
	plain := textTo("bob", "same")
	b.send(t, tok, plain)
	b.send(t, tok, plain)
	require.Len(t, b.fake.Received("bob"), 2)
}

func TestMemberLimitsDropSilently(t *testing.T) {
	t.Parallel()
	b := setup(t, wecomfake.Config{})
	tok := b.token(t)
	for i := range 31 {
		r := b.send(t, tok, textTo("alice", fmt.Sprintf("m%d", i)))
		require.Equal(t, 0, r.errcode(), "the API says ok even when it drops")
	}
	require.Len(t, b.fake.Received("alice"), 30)
	drops := b.fake.Drops()
	require.Len(t, drops, 1)
	require.Equal(t, wecomfake.DropMinuteLimit, drops[0].Reason)
	require.Equal(t, "alice", drops[0].UserID)

	// The minute window slides: a minute later 30 more fit, and the hour
	// limit (1000) is far away.
	b.fake.Advance(time.Minute)
	require.Equal(t, 0, b.send(t, tok, textTo("alice", "later")).errcode())
	require.Len(t, b.fake.Received("alice"), 31)

	small := setup(t, wecomfake.Config{MemberPerMinute: -1, MemberPerHour: 3})
	tok = small.token(t)
	for i := range 4 {
		small.send(t, tok, textTo("bob", fmt.Sprintf("h%d", i)))
	}
	require.Len(t, small.fake.Received("bob"), 3)
	require.Equal(t, wecomfake.DropHourLimit, small.fake.Drops()[0].Reason)
}

func TestRecall(t *testing.T) {
	t.Parallel()
	b := setup(t, twoCorps())
	tok := b.token(t)
	id := b.send(t, tok, textTo("alice", "oops")).str("msgid")
	recall := func(tok, id string) reply {
		return b.do(t, http.MethodPost, "/cgi-bin/message/recall", url.Values{"access_token": {tok}}, `{"msgid":"`+id+`"}`)
	}
	other := b.do(t, http.MethodGet, "/cgi-bin/gettoken", url.Values{"corpid": {wecomfake.DemoCorpID}, "corpsecret": {"second-secret"}}, "").str("access_token")
	require.Equal(t, 40058, recall(other, id).errcode(), "another app's message")
	require.Equal(t, 0, recall(tok, id).errcode())
	require.True(t, b.fake.Received("alice")[0].Recalled)

	late := b.send(t, tok, textTo("bob", "old"))
	b.fake.Advance(25 * time.Hour)
	require.Equal(t, 42052, recall(b.token(t), late.str("msgid")).errcode())
}

func TestUnknownTopLevelFields(t *testing.T) {
	t.Parallel()
	withKey := `{"touser":"alice","msgtype":"text","agentid":1000002,"text":{"content":"hi"},"herald_key":"k1","enable_duplicate_check":1,"duplicate_check_interval":14400}`
	plain := `{"touser":"alice","msgtype":"text","agentid":1000002,"text":{"content":"hi"},"safe":0,"enable_id_trans":0,"enable_duplicate_check":1,"duplicate_check_interval":14400}`

	// Default: accepted, and part of the body the duplicate check compares.
	b := setup(t, wecomfake.Config{})
	require.Equal(t, wecomfake.UnknownFieldsAccept, b.fake.Config().UnknownFields)
	tok := b.token(t)
	require.Equal(t, 0, b.send(t, tok, withKey).errcode())
	require.Equal(t, 0, b.send(t, tok, strings.Replace(withKey, "k1", "k2", 1)).errcode())
	require.Len(t, b.fake.Received("alice"), 2, "bodies that differ only in the unknown field are two messages")

	// Reject: 40058 naming the field, nothing delivered; defined fields pass.
	r := setup(t, wecomfake.Config{UnknownFields: wecomfake.UnknownFieldsReject})
	tok = r.token(t)
	rep := r.send(t, tok, withKey)
	require.Equal(t, 40058, rep.errcode(), string(rep.raw))
	require.Contains(t, rep.str("errmsg"), "unknown field herald_key")
	require.Empty(t, r.fake.Received("alice"))
	require.Equal(t, 0, r.send(t, tok, plain).errcode())
	require.Len(t, r.fake.Received("alice"), 1)

	// Switchable at run time, from code and from the admin API.
	require.NoError(t, r.fake.SetUnknownFields(wecomfake.UnknownFieldsAccept))
	require.Equal(t, 0, r.send(t, tok, withKey).errcode())
	st, raw := r.adminDo(t, http.MethodPost, "/settings", `{"unknown_fields":"reject"}`)
	require.Equal(t, 200, st, string(raw))
	require.Contains(t, string(raw), `"unknown_fields":"reject"`)
	require.Equal(t, 40058, r.send(t, tok, strings.Replace(withKey, "k1", "k3", 1)).errcode())
	st, _ = r.adminDo(t, http.MethodPost, "/settings", `{"unknown_fields":"maybe"}`)
	require.Equal(t, 400, st)
	require.Error(t, r.fake.SetUnknownFields("maybe"))

	_, err := wecomfake.ParseConfig([]byte("unknown_fields: sometimes\n"))
	require.ErrorIs(t, err, wecomfake.ErrBadConfig)
	cfg, err := wecomfake.ParseConfig([]byte("unknown_fields: reject\n"))
	require.NoError(t, err)
	require.Equal(t, wecomfake.UnknownFieldsReject, cfg.UnknownFields)
}
