package rules

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// exprRule is a rule whose message content is the Lua expression expr.
func exprRule(name, expr string) string {
	return `return rule {
  name = "` + name + `", channel = "mock", timezone = "Asia/Shanghai", calendar = "cn_workday",
  recipients = function(run) return { "alice" } end,
  message = function(run, to) return { content = (` + expr + `) } end,
}
`
}

func TestLibrary(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ expr, want string }{
		"now":          {`tostring(time.now())`, "2026-12-01T09:00:00+08:00"},
		"run_slot":     {`run.slot .. " " .. run.date .. " " .. run.zone`, "2026-12-01T09:00:00+08:00 2026-12-01 Asia/Shanghai"},
		"add":          {`time.format(time.add(time.now(), "90m"), "15:04")`, "10:30"},
		"method":       {`time.now():add(3600):format("15:04")`, "10:00"},
		"add_days":     {`time.date(time.add_days(time.now(), 31))`, "2027-01-01"},
		"in_zone":      {`time.now():in_zone("UTC"):format("15:04 MST")`, "01:00 UTC"},
		"parse_cmp":    {`tostring(time.parse("2026-12-24") > time.now())`, "true"},
		"parse_zone":   {`tostring(time.parse("2026-12-01 09:00"))`, "2026-12-01T09:00:00+08:00"},
		"diff":         {`tostring(time.diff("2026-12-01T10:00:00+08:00", time.now()))`, "3600"},
		"weekday":      {`tostring(time.weekday(time.now()))`, "2"},
		"concat":       {`"at " .. time.now()`, "at 2026-12-01T09:00:00+08:00"},
		"json_sorted":  {`json.encode({ b = 1, a = { 2, 3.5 }, c = "<&>", d = json.null, e = {} })`, `{"a":[2,3.5],"b":1,"c":"<&>","d":null,"e":{}}`},
		"json_decode":  {`tostring(json.decode('{"x":[1,2]}').x[2])`, "2"},
		"json_bad":     {`select(2, json.decode("{"))`, "json.decode: unexpected EOF"},
		"text":         {`text.render("Hi {{ name }} {{missing}}{{p.q}}!", { name = "A", p = { q = 7 } })`, "Hi A 7!"},
		"workday":      {`tostring(calendar.is_workday("2026-10-01")) .. tostring(calendar.is_workday("2026-10-10"))`, "falsetrue"},
		"weekday_cal":  {`tostring(calendar.is_workday("2026-10-01", "weekday"))`, "true"},
		"holiday":      {`calendar.holiday("2026-10-01") .. tostring(calendar.holiday("2026-12-01"))`, "国庆节nil"},
		"next_workday": {`calendar.next_workday("2026-09-30")`, "2026-10-08"},
		"lunar":        {`calendar.lunar("2026-09-25").text .. calendar.lunar(time.now()).month`, "八月十五10"},
		"where":        {`#people.where { role = { "sales", "ops" }, region = "east" } .. ""`, "2"},
		"get":          {`people.get("ann").name .. tostring(people.get("nobody"))`, "Annnil"},
		"manager_of":   {`people.manager_of("ann").name .. tostring(people.manager_of("boss"))`, "Bossnil"},
		"all":          {`#people.all() .. " " .. people.count()`, "3 3"},
		"log":          {`(function() log.info("hello", { n = 1 }) return "ok" end)()`, "ok"},
		"globals":      {`(function() x = 1 return tostring(x) end)()`, "1"},
	}
	files := map[string]string{
		"people.csv": "userid,name,roles,manager,region\nboss,Boss,manager,,north\nann,Ann,sales,boss,east\nbob,Bob,ops,boss,east\n",
	}
	for name, c := range cases {
		files[name+".lua"] = exprRule(name, c.expr)
	}
	s := load(t, newDir(t, files))
	for _, st := range s.Status() {
		require.Empty(t, st.Error, st.File)
	}
	slot := mustTime(t, "2026-12-01T09:00:00+08:00")
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := s.Plan(context.Background(), name, engine.RunContext{Key: "k", Slot: slot.UTC()})
			require.NoError(t, err)
			require.Len(t, out, 1)
			require.Equal(t, c.want, content(t, out[0].Payload))
		})
	}
}

func TestLibraryErrors(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ expr, want string }{
		"where_typo":    {`people.where { rol = "sales" }`, `unknown field "rol"`},
		"bad_date":      {`calendar.is_workday("2026-13-01")`, "bad date"},
		"bad_cal":       {`calendar.is_workday("2026-10-01", "nope")`, "unknown calendar"},
		"bad_zone":      {`time.in_zone(time.now(), "Mars/Base")`, "unknown zone"},
		"bad_duration":  {`time.add(time.now(), "soon")`, "time.add"},
		"huge_seconds":  {`time.add(time.now(), 1e300)`, "time.add: 1e+300 seconds: out of range"},
		"nan_seconds":   {`time.add(time.now(), 0/0)`, "time.add: NaN seconds: out of range"},
		"json_func":     {`json.encode({ f = print or function() end })`, "no JSON form"},
		"json_cycle":    {`(function() local t = {} t.t = t return json.encode(t) end)()`, "nested more than"},
		"text_unclosed": {`text.render("Hi {{name", {})`, "unclosed"},
	}
	files := map[string]string{}
	for name, c := range cases {
		files[name+".lua"] = exprRule(name, c.expr)
	}
	s := load(t, newDir(t, files))
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := s.Plan(context.Background(), name, engine.RunContext{Key: "k", Slot: time.Now()})
			require.ErrorContains(t, err, c.want)
			require.ErrorContains(t, err, name+".lua:4:")
		})
	}
}

// TestPayloadDeterministic: the same run planned twice, on different
// states, gives the same bytes (leaders must agree), keys sorted.
func TestPayloadDeterministic(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{"r.lua": `return rule {
  name = "r", channel = "mock",
  recipients = function(run) return { "a", "b", "a" } end,
  message = function(run, to)
    local t = { msgtype = "markdown" }
    for i = 1, 20 do t["k" .. i] = i end
    t.markdown = { content = "**" .. to.userid .. "** <b>&" }
    return t
  end,
}`}))
	first, err := plan(t, s, "r", "")
	require.NoError(t, err)
	require.Len(t, first, 2, "a duplicate recipient is planned once")
	require.Contains(t, string(first[0].Payload), `{"k1":1,"k10":10,"k11":11,`)
	require.Contains(t, string(first[0].Payload), `"markdown":{"content":"**a** <b>&"}`)
	for range 5 {
		again, err := plan(t, s, "r", "")
		require.NoError(t, err)
		require.Equal(t, first, again)
	}
}

func TestOnFailed(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{
		"r.lua": `return rule {
  name = "r", channel = "mock",
  recipients = function(run) return {} end,
  message = function(run, to) return {} end,
  on_failed = function(run, d)
    if d.state ~= "failed" or d.attempts ~= 4 then error("unexpected " .. d.state) end
    log.warn("delivery failed", { id = d.id, recipient = d.recipient, err = d.error })
  end,
}`,
		"plain.lua": simpleRule("plain", "return {}"),
	}))
	fd := engine.FailedDelivery{ID: "d1", Recipient: "alice", State: engine.StateFailed, Attempts: 4, Error: "boom"}
	require.NoError(t, s.OnFailed(context.Background(), "r", runAt(time.Now()), fd, nil))
	fd.State = engine.StateExpired
	require.ErrorContains(t, s.OnFailed(context.Background(), "r", runAt(time.Now()), fd, nil), "unexpected expired")
	require.NoError(t, s.OnFailed(context.Background(), "plain", runAt(time.Now()), fd, nil))
}

// TestPairsOrderStable: a message built by iterating a person's fields
// with pairs() is the same on every load (every leader).
func TestPairsOrderStable(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"people.csv": "userid,name,zeta,alpha,mid,beta,gamma,delta\nann,Ann,1,2,3,4,5,6\n",
		"r.lua": exprRule("r", `(function()
      local keys = {}
      for k in pairs(people.get("ann")) do keys[#keys + 1] = k end
      return table.concat(keys, ",")
    end)()`),
	}
	var first string
	for range 5 {
		s := load(t, newDir(t, files))
		out, err := plan(t, s, "r", "")
		require.NoError(t, err)
		got := content(t, out[0].Payload)
		if first == "" {
			first = got
		}
		require.Equal(t, first, got)
	}
	require.Contains(t, first, "alpha,beta,delta,gamma,mid,zeta")
}

// TestLogBudget: a rule that logs in a loop wrote a line per turn for the
// whole of its time limit, for every call of every run (millions of lines
// of up to 4 KiB): a run now logs at most maxLogLines, then says it stopped.
func TestLogBudget(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	s := load(t, newDir(t, map[string]string{"chatty.lua": simpleRule("chatty",
		`for i = 1, 20000 do log.info("turn", { i = i }) end return { "alice", "bob" }`)}),
		func(c *Config) { c.Logger = logger; c.CallTimeout = 10 * time.Second })
	for range 2 {
		mu.Lock()
		buf.Reset()
		mu.Unlock()
		_, err := plan(t, s, "chatty", "")
		require.NoError(t, err)
		mu.Lock()
		out := buf.String()
		mu.Unlock()
		require.Equal(t, maxLogLines, strings.Count(out, "msg=turn"), "each run has its own budget")
		require.Equal(t, 1, strings.Count(out, "further log lines of this run are dropped"))
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestMessageErrorNamesRecipient: one person's data that breaks message()
// fails the run for everybody; the error said where in the file, not for
// whom, so the operator could not find the row to fix.
func TestMessageErrorNamesRecipient(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{
		"people.csv": "userid,name\nann,Ann\nbob,\n",
		"hello.lua": `return rule {
  name = "hello", channel = "mock",
  recipients = function(run) return people.all() end,
  message = function(run, to)
    return { content = "hi " .. to.name }
  end,
}
`}))
	_, err := plan(t, s, "hello", "")
	var re *RuleError
	require.ErrorAs(t, err, &re)
	require.Equal(t, 5, re.Line)
	require.Contains(t, re.Msg, `message for "bob"`)
	require.Contains(t, re.Msg, "concat")
}
