package wecom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
	"github.com/heraldhq/herald/plugins/wecom"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

// sentBodies returns the bodies of the message/send calls, in order.
func sentBodies(f *wecomfake.Server, path string) []string {
	var out []string
	for _, c := range f.Requests() {
		if c.Path == path {
			out = append(out, string(c.Body))
		}
	}
	return out
}

func TestBodyIsDeterministic(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{RejectEscapes: true}, "")
	other := e.channel(t, appConfig(e.api.URL, wecomfake.DemoSecret, ""))
	payloads := []string{
		`{"msgtype":"textcard","textcard":{"title":"<Daily> & more","description":"d","url":"https://x.test/?a=1&b=2","btntxt":"详情"},"safe":0}`,
		`{"safe":0,"textcard":{"url":"https://x.test/?a=1&b=2","btntxt":"详情","description":"d","title":"<Daily> & more"},"msgtype":"textcard"}`,
	}
	m := sdk.Message{ID: "d1", IdempotencyKey: "run-1/alice", Recipient: "alice", Payload: json.RawMessage(payloads[0]), Attempt: 1}
	require.Equal(t, sdk.StatusSent, sendOne(t, e.ch, m).Status)
	m.Payload, m.Attempt = json.RawMessage(payloads[1]), 2 // same message, keys reordered, next attempt, another process
	require.Equal(t, sdk.StatusSent, sendOne(t, other, m).Status)

	bodies := sentBodies(e.fake, wecomfake.PathSend)
	require.Len(t, bodies, 2)
	require.Equal(t, bodies[0], bodies[1], "same message, same bytes")
	require.Equal(t,
		`{"touser":"alice","msgtype":"textcard","agentid":1000002,"textcard":{"btntxt":"详情","description":"d","title":"<Daily> & more","url":"https://x.test/?a=1&b=2"},"safe":0,"herald_key":"run-1/alice","enable_duplicate_check":1,"duplicate_check_interval":14400}`,
		bodies[0], "fixed field order, no HTML escaping")
	require.Len(t, e.fake.Received("alice"), 1, "the repeat was WeCom's duplicate")
}

func TestShorthandEqualsFullForm(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{}, `,"key_field":"-","duplicate_check_interval":"30m"`)
	sendOne(t, e.ch, sdk.Message{ID: "a", Recipient: "alice", Payload: json.RawMessage(`{"msgtype":"markdown","content":"**hi** <@bob>"}`)})
	sendOne(t, e.ch, sdk.Message{ID: "b", Recipient: "alice", Payload: json.RawMessage(`{"msgtype":"markdown","markdown":{"content":"**hi** <@bob>"}}`)})
	bodies := sentBodies(e.fake, wecomfake.PathSend)
	require.Equal(t, `{"touser":"alice","msgtype":"markdown","agentid":1000002,"markdown":{"content":"**hi** <@bob>"},"enable_duplicate_check":1,"duplicate_check_interval":1800}`, bodies[0])
	require.Equal(t, bodies[0], bodies[1])
	require.Len(t, e.fake.Received("alice"), 1, "without the key field equal content collapses within the interval")
}

func TestEqualContentDistinctDeliveries(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{}, "")
	for _, id := range []string{"monday", "tuesday"} {
		require.Equal(t, sdk.StatusSent, sendOne(t, e.ch, msg(id, "alice", text("please fill in your report"))).Status)
	}
	require.Len(t, e.fake.Received("alice"), 2, "two deliveries with equal text stay two messages")
}

func TestPayloadRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{}, "")
	cases := map[string]struct {
		to, payload, want string
	}{
		"not JSON":           {"alice", `{"msgtype":`, "not a JSON object"},
		"array":              {"alice", `[1]`, "not a JSON object"},
		"no msgtype":         {"alice", `{"text":{"content":"x"}}`, "msgtype"},
		"object missing":     {"alice", `{"msgtype":"text"}`, `needs a "text" object`},
		"both forms":         {"alice", `{"msgtype":"text","content":"a","text":{"content":"a"}}`, "both"},
		"shorthand for card": {"alice", `{"msgtype":"textcard","content":"a"}`, "shorthand"},
		"sets recipients":    {"alice", `{"msgtype":"text","text":{"content":"a"},"touser":"@all"}`, `must not set "touser"`},
		"sets agentid":       {"alice", `{"msgtype":"text","text":{"content":"a"},"agentid":1}`, `must not set "agentid"`},
		"unknown field":      {"alice", `{"msgtype":"text","text":{"content":"a"},"colour":"red"}`, `unexpected payload field "colour"`},
		"empty content":      {"alice", `{"msgtype":"text","content":""}`, "non-empty"},
		"too long":           {"alice", `{"msgtype":"text","content":"` + strings.Repeat("汉", 683) + `"}`, "2049 bytes; WeCom allows 2048"},
		"long title":         {"alice", `{"msgtype":"textcard","textcard":{"title":"` + strings.Repeat("t", 129) + `","description":"d","url":"u"}}`, "textcard.title"},
		"long button":        {"alice", `{"msgtype":"textcard","textcard":{"title":"t","description":"d","url":"u","btntxt":"点击查看详情"}}`, "btntxt"},
		"nine articles":      {"alice", `{"msgtype":"news","news":{"articles":[{},{},{},{},{},{},{},{},{}]}}`, "1 to 8"},
		"empty recipient":    {"", `{"msgtype":"text","content":"a"}`, "empty recipient"},
		"several recipients": {"alice|bob", `{"msgtype":"text","content":"a"}`, "single userid"},
		"everyone":           {"@all", `{"msgtype":"text","content":"a"}`, "single userid"},
		"trailing data":      {"alice", `{"msgtype":"text","content":"a"} {}`, "trailing"},
	}
	for name, c := range cases {
		r := sendOne(t, e.ch, sdk.Message{ID: name, Recipient: c.to, Payload: json.RawMessage(c.payload)})
		require.Equal(t, sdk.StatusPermanent, r.Status, name)
		require.Contains(t, r.Error, c.want, name)
	}
	require.Zero(t, e.fake.Calls("message/send"), "refused payloads make no call")
	require.Zero(t, e.fake.Calls("gettoken"))

	at := strings.Repeat("汉", 682) + "xx" // exactly 2048 bytes
	r := sendOne(t, e.ch, sdk.Message{ID: "max", Recipient: "alice", Payload: json.RawMessage(`{"msgtype":"text","content":"` + at + `"}`)})
	require.Equal(t, sdk.StatusSent, r.Status)
	got := e.fake.Received("alice")
	require.Len(t, got, 1)
	require.False(t, got[0].Truncated)
	require.Equal(t, at, got[0].Content)
}

func TestRobotMode(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{}, "")
	rb := e.channel(t, robotConfig(e.api.URL, wecomfake.DemoRobotKey, ""))
	info, err := rb.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, []sdk.Limit{{Scope: sdk.ScopeChannel, Count: 20, Per: time.Minute}}, info.Limits)

	r := sendOne(t, rb, msg("r1", "ops-group", json.RawMessage(`{"msgtype":"markdown","content":"`+strings.Repeat("m", 4096)+`"}`)))
	require.Equal(t, sdk.StatusSent, r.Status, "%+v", r)
	r = sendOne(t, rb, msg("r2", "ops-group", json.RawMessage(`{"msgtype":"markdown","content":"`+strings.Repeat("m", 4097)+`"}`)))
	require.Equal(t, sdk.StatusPermanent, r.Status)
	r = sendOne(t, rb, msg("r3", "ops-group", json.RawMessage(`{"msgtype":"text","text":{"content":"<b>up</b>","mentioned_list":["@all"]}}`)))
	require.Equal(t, sdk.StatusSent, r.Status)
	bodies := sentBodies(e.fake, wecomfake.PathWebhook)
	require.Equal(t, `{"msgtype":"text","text":{"content":"<b>up</b>","mentioned_list":["@all"]}}`, bodies[len(bodies)-1])

	// A repeat of a key this process saw sent is answered without a call.
	calls := e.fake.Calls("webhook/send")
	r = sendOne(t, rb, msg("r3", "ops-group", json.RawMessage(`{"msgtype":"text","text":{"content":"<b>up</b>","mentioned_list":["@all"]}}`)))
	require.Equal(t, sdk.StatusSent, r.Status)
	require.Equal(t, calls, e.fake.Calls("webhook/send"))

	for i := range 18 {
		require.Equal(t, sdk.StatusSent, sendOne(t, rb, msg(strings.Repeat("x", i+1), "g", text("tick"))).Status)
	}
	r = sendOne(t, rb, msg("over", "g", text("tick")))
	require.Equal(t, sdk.StatusRateLimited, r.Status, "%+v", r)
	require.GreaterOrEqual(t, r.RetryAfter, time.Minute)
	require.Len(t, e.fake.RobotReceived(wecomfake.DemoRobotKey), 20)

	bad := e.channel(t, robotConfig(e.api.URL, "removed-robot", ""))
	r = sendOne(t, bad, msg("b", "g", text("x")))
	require.Equal(t, sdk.StatusConfig, r.Status)
	require.Equal(t, "93000", r.Code)
	require.NotContains(t, r.Error, "removed-robot")
}

func TestRobotPacedByHostLimits(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{}, "")
	rb := e.channel(t, robotConfig(e.api.URL, wecomfake.DemoRobotKey, ""))
	info, err := rb.Info(context.Background())
	require.NoError(t, err)
	var msgs []sdk.Message
	for i := range 60 {
		msgs = append(msgs, msg(fmt.Sprintf("alert-%d", i), "ops", text(fmt.Sprintf("alert %d", i))))
	}
	out := newDriver(t, rb, e.clock).honourLimits(info.Limits).run(msgs)
	for _, m := range msgs {
		o := out[m.ID]
		require.Equal(t, sdk.StatusSent, o.result.Status, "%s: %+v", m.ID, o.result)
		require.Zero(t, o.rateLimited, "%s: the host kept the robot under 20/minute, so WeCom never said 45009", m.ID)
	}
	require.Len(t, e.fake.RobotReceived(wecomfake.DemoRobotKey), 60)
	require.Equal(t, 60, e.fake.Calls("webhook/send"))
}

func TestNestedKeyOrderDoesNotChangeTheBody(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{}, "")
	pairs := [][2]string{
		{`{"msgtype":"news","news":{"articles":[{"title":"T","url":"https://x.test/1","picurl":"https://x.test/p.png","description":"d"},{"url":"https://x.test/2","title":"U"}]}}`,
			`{"news":{"articles":[{"description":"d","picurl":"https://x.test/p.png","url":"https://x.test/1","title":"T"},{"title":"U","url":"https://x.test/2"}]},"msgtype":"news"}`},
		{`{"msgtype":"template_card","template_card":{"card_type":"text_notice","main_title":{"title":"日报","desc":"9:00"},"horizontal_content_list":[{"keyname":"a","value":"1"}],"card_action":{"type":1,"url":"https://x.test"},"task_id":"t-1.0"}}`,
			`{"template_card":{"task_id":"t-1.0","card_action":{"url":"https://x.test","type":1},"horizontal_content_list":[{"value":"1","keyname":"a"}],"main_title":{"desc":"9:00","title":"日报"},"card_type":"text_notice"},"msgtype":"template_card"}`},
	}
	// The second of each pair is the retry by another process (a
	// restarted plugin, a new leader), which has no memory of the first.
	chans := []*wecom.Channel{e.ch, e.channel(t, appConfig(e.api.URL, wecomfake.DemoSecret, ""))}
	for i, p := range pairs {
		for j, payload := range p {
			m := sdk.Message{ID: fmt.Sprint(i, j), IdempotencyKey: fmt.Sprint("k", i), Recipient: "alice", Payload: json.RawMessage(payload), Attempt: j + 1}
			require.Equal(t, sdk.StatusSent, sendOne(t, chans[j], m).Status)
		}
	}
	bodies := sentBodies(e.fake, wecomfake.PathSend)
	require.Len(t, bodies, 4)
	require.Equal(t, bodies[0], bodies[1], "same news, same bytes")
	require.Contains(t, bodies[0], `"articles":[{"description":"d","picurl":"https://x.test/p.png","title":"T","url":"https://x.test/1"},{"title":"U","url":"https://x.test/2"}]`)
	require.Equal(t, bodies[2], bodies[3], "same template card, same bytes")
	require.Contains(t, bodies[2], `"card_action":{"type":1,"url":"https://x.test"}`)
	require.Len(t, e.fake.Received("alice"), 2, "each retry was WeCom's duplicate")
}

// WeCom cuts a news article's title past 128 bytes and its description
// past 512, silently, as it does app text (its send documentation, quoted
// alike by the client libraries). The channel refused over-long text and
// textcards but let news through to be cut. It refuses them now, for app
// and robot alike; fields of exactly the limit, in multi-byte text, go.
func TestNewsArticleOverLimitRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{}, "")
	robot := e.channel(t, robotConfig(e.api.URL, wecomfake.DemoRobotKey, ""))
	article := func(title, desc string) string {
		b, _ := json.Marshal(map[string]any{"msgtype": "news", "news": map[string]any{"articles": []any{
			map[string]any{"title": "ok", "url": "https://example.com/a"},
			map[string]any{"title": title, "description": desc, "url": "https://example.com/b"},
		}}})
		return string(b)
	}
	title128, desc512 := strings.Repeat("汉", 42)+"xx", strings.Repeat("汉", 170)+"xx"
	for _, ch := range []sdk.Channel{e.ch, robot} {
		for name, c := range map[string]struct{ payload, want string }{
			"long title":       {article(title128+"x", "d"), "news.articles[1].title is 129 bytes; WeCom allows 128"},
			"long description": {article("t", desc512+"x"), "news.articles[1].description is 513 bytes; WeCom allows 512"},
			"title not text":   {`{"msgtype":"news","news":{"articles":[{"title":7,"url":"u"}]}}`, "news.articles[0].title must be a string"},
		} {
			r := sendOne(t, ch, sdk.Message{ID: name, Recipient: "alice", Payload: json.RawMessage(c.payload)})
			require.Equal(t, sdk.StatusPermanent, r.Status, "%s: %+v", name, r)
			require.Contains(t, r.Error, c.want, name)
		}
	}
	require.Zero(t, e.fake.Calls("message/send"), "refused payloads make no call")
	require.Zero(t, e.fake.Calls("webhook/send"))

	r := sendOne(t, e.ch, sdk.Message{ID: "max", Recipient: "alice", Payload: json.RawMessage(article(title128, desc512))})
	require.Equal(t, sdk.StatusSent, r.Status, "%+v", r)
	r = sendOne(t, robot, sdk.Message{ID: "max", Recipient: "alice", Payload: json.RawMessage(article(title128, desc512))})
	require.Equal(t, sdk.StatusSent, r.Status, "%+v", r)
}
