package rules

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// fakeSubmitter records what on_failed submitted and answers with err.
type fakeSubmitter struct {
	mu   sync.Mutex
	got  []engine.SubmitTask
	err  error
	seen bool // a submitter was found in the context
}

// hookKey marks the context a test hands OnFailed, so that submit can
// check it gets the hook's context.
type hookKey struct{}

func (f *fakeSubmitter) ctx() context.Context {
	return context.WithValue(context.Background(), hookKey{}, true)
}

func (f *fakeSubmitter) submit(ctx context.Context, t engine.SubmitTask) (*engine.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = ctx.Value(hookKey{}) != nil
	if f.err != nil {
		return nil, f.err
	}
	f.got = append(f.got, t)
	return &engine.Task{Key: t.Key, Rule: t.Rule, DueAt: t.DueAt, Data: t.Data, State: engine.TaskPending}, nil
}

func (f *fakeSubmitter) submitted() []engine.SubmitTask {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]engine.SubmitTask(nil), f.got...)
}

// TestExampleFollowUpCompensation: the owner's reminder finally failed, so
// follow_up's on_failed schedules the manager's copy, 30 minutes after the
// reminder's slot, under a key built from the delivery: the same task
// again when on_failed runs a second time.
func TestExampleFollowUpCompensation(t *testing.T) {
	t.Parallel()
	s := examples(t)
	slot := mustTime(t, "2026-12-01T15:00:00+08:00")
	run := engine.RunContext{Rule: "follow_up", Key: engine.TaskRunKey("follow-8812"), Slot: slot, Zone: "Asia/Shanghai",
		Data: []byte(`{"customer":"华东机电","note":"确认报价","owner":"wangfang"}`)}
	fd := engine.FailedDelivery{ID: engine.DeliveryID(run.Key, "wangfang"), Recipient: "wangfang", State: engine.StateFailed, Attempts: 4, Error: "errcode 60111: userid not found"}

	f := &fakeSubmitter{}
	require.NoError(t, s.OnFailed(f.ctx(), "follow_up", run, fd, f.submit))
	require.NoError(t, s.OnFailed(f.ctx(), "follow_up", run, fd, f.submit), "on_failed runs at least once")
	got := f.submitted()
	require.Len(t, got, 2)
	want := engine.SubmitTask{
		Key: "follow-undelivered-" + fd.ID, Rule: "follow_up", DueAt: slot.Add(30 * time.Minute),
		Data: []byte(`{"customer":"华东机电","note":"确认报价","owner":"wangfang","undelivered":true}`),
	}
	for _, g := range got {
		require.Equal(t, want.Key, g.Key)
		require.Equal(t, want.Rule, g.Rule)
		require.True(t, want.DueAt.Equal(g.DueAt), g.DueAt)
		require.Equal(t, string(want.Data), string(g.Data))
		require.True(t, g.Now.IsZero(), "the leader stamps Now")
	}
	require.True(t, f.seen, "the submitter gets the hook's context")

	// The escalation goes to the manager only.
	out, err := s.Plan(context.Background(), "follow_up", engine.RunContext{Rule: "follow_up", Key: engine.TaskRunKey(want.Key), Slot: want.DueAt, Data: want.Data})
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, "lina", out[0].Recipient)
	require.Contains(t, content(t, out[0].Payload), "【未送达】发给 王芳 的跟进提醒未能送达：客户「华东机电」（确认报价）")

	// The manager's copy failing (in an overdue run, or the escalation
	// itself) submits nothing more.
	f = &fakeSubmitter{}
	overdue := run
	overdue.Data = []byte(`{"customer":"华东机电","owner":"wangfang","overdue":true}`)
	require.NoError(t, s.OnFailed(f.ctx(), "follow_up", overdue, engine.FailedDelivery{ID: "x", Recipient: "lina", State: engine.StateExpired}, f.submit))
	esc := engine.RunContext{Rule: "follow_up", Key: engine.TaskRunKey(want.Key), Slot: want.DueAt, Data: want.Data}
	require.NoError(t, s.OnFailed(f.ctx(), "follow_up", esc, engine.FailedDelivery{ID: "y", Recipient: "lina", State: engine.StateFailed}, f.submit))
	require.Empty(t, f.submitted())

	// A refused submission fails the hook (the engine raises an alert).
	f = &fakeSubmitter{err: &engine.TaskConflictError{Key: want.Key, Differences: []engine.TaskDifference{{Field: "data"}}}}
	err = s.OnFailed(f.ctx(), "follow_up", run, fd, f.submit)
	require.ErrorContains(t, err, `task.submit: task "follow-undelivered-`)
	require.ErrorContains(t, err, "exists with a different data")
}

// taskRule is a rule whose on_failed submits args (a Lua expression) and
// fails with task.submit's error.
func taskRule(name, args string) string {
	return `return rule {
  name = "` + name + `", channel = "mock", timezone = "Asia/Shanghai",
  recipients = function(run) return {} end,
  message = function(run, to) return {} end,
  on_failed = function(run, d)
    local ok, err = task.submit(` + args + `)
    if ok ~= true then error(err or "no error") end
  end,
}
`
}

func TestTaskSubmitArguments(t *testing.T) {
	t.Parallel()
	good := map[string]struct {
		args string
		want engine.SubmitTask
	}{
		"due_at": {`{ key = "k-" .. d.id, rule = "target", due_at = "2026-12-02T09:00:00+08:00", data = { n = 1, list = { "a", "b" }, nested = { x = true } } }`,
			engine.SubmitTask{Key: "k-d1", Rule: "target", DueAt: mustTime(t, "2026-12-02T09:00:00+08:00"), Data: []byte(`{"list":["a","b"],"n":1,"nested":{"x":true}}`)}},
		"due_time": {`{ key = "k", rule = "target", due_at = time.add(time.now(), "1h") }`,
			engine.SubmitTask{Key: "k", Rule: "target", DueAt: mustTime(t, "2026-12-01T10:00:00+08:00")}},
		"after": {`{ key = "k", rule = "target", after = "90m", data = {} }`,
			engine.SubmitTask{Key: "k", Rule: "target", DueAt: mustTime(t, "2026-12-01T10:30:00+08:00"), Data: []byte(`{}`)}},
		"after_seconds": {`{ key = "k", rule = "target", after = 60 }`,
			engine.SubmitTask{Key: "k", Rule: "target", DueAt: mustTime(t, "2026-12-01T09:01:00+08:00")}},
		"in": {`{ key = "k", rule = "target", ["in"] = "10m" }`,
			engine.SubmitTask{Key: "k", Rule: "target", DueAt: mustTime(t, "2026-12-01T09:10:00+08:00")}},
	}
	bad := map[string]struct{ args, want string }{
		"no_key":      {`{ rule = "target", after = "1m" }`, "key is required"},
		"key_space":   {`{ key = "a b", rule = "target", after = "1m" }`, `must not contain ' '`},
		"key_slash":   {`{ key = "a/b", rule = "target", after = "1m" }`, `must not contain '/'`},
		"key_alert":   {`{ key = "alert:x", rule = "target", after = "1m" }`, `"alert:" are Herald's own`},
		"key_long":    {`{ key = string.rep("k", 201), rule = "target", after = "1m" }`, "longer than 200 bytes"},
		"key_number":  {`{ key = 7, rule = "target", after = "1m" }`, "key: want a string, got number"},
		"no_rule":     {`{ key = "k", after = "1m" }`, "rule is required"},
		"unknown":     {`{ key = "k", rule = "nope", after = "1m" }`, `rule "nope" is not loaded`},
		"scheduled":   {`{ key = "k", rule = "ticker", after = "1m" }`, `rule "ticker" has a schedule`},
		"no_due":      {`{ key = "k", rule = "target" }`, "give exactly one of due_at"},
		"both_due":    {`{ key = "k", rule = "target", due_at = "2026-12-02T09:00:00+08:00", after = "1m" }`, "give exactly one of due_at"},
		"after_in":    {`{ key = "k", rule = "target", ["in"] = "1m", after = "1m" }`, `not both`},
		"bad_due":     {`{ key = "k", rule = "target", due_at = "tomorrow" }`, `due_at "tomorrow": want RFC 3339`},
		"no_offset":   {`{ key = "k", rule = "target", due_at = "2026-12-02 09:00" }`, `want RFC 3339 with offset`},
		"due_number":  {`{ key = "k", rule = "target", due_at = 5 }`, "due_at: want a time or an RFC 3339 string, got number"},
		"bad_after":   {`{ key = "k", rule = "target", after = "soon" }`, `after "soon": want a duration`},
		"negative":    {`{ key = "k", rule = "target", after = "-5m" }`, "must not be negative"},
		"far":         {`{ key = "k", rule = "target", after = "100000h" }`, "more than ten years"},
		"far_seconds": {`{ key = "k", rule = "target", after = 1e12 }`, "after 1e+12 seconds: out of range"},
		"nan_seconds": {`{ key = "k", rule = "target", after = 0/0 }`, "out of range"},
		"typo":        {`{ key = "k", rule = "target", due = "1m" }`, `unknown field due; want key, rule, due_at or after, and data`},
		"positional":  {`{ "k" }`, "unknown field 1"},
		"data_list":   {`{ key = "k", rule = "target", after = "1m", data = { 1, 2 } }`, "data: want a table with named fields"},
		"data_string": {`{ key = "k", rule = "target", after = "1m", data = "x" }`, "data: want a table, got string"},
		"data_func":   {`{ key = "k", rule = "target", after = "1m", data = { f = print or tostring } }`, "data: value has no JSON form"},
		"data_big":    {`{ key = "k", rule = "target", after = "1m", data = { s = string.rep("x", 70000) } }`, "over the 65536 byte limit"},
		"not_table":   {`"k"`, "table expected"},
	}
	files := map[string]string{
		"target.lua": simpleRule("target", "return {}"),
		"ticker.lua": `return rule { name = "ticker", schedule = "0 9 * * *", channel = "mock",
  recipients = function(run) return {} end, message = function(run, to) return {} end }`,
	}
	for name, tc := range good {
		files["good_"+name+".lua"] = taskRule("good_"+name, tc.args)
	}
	for name, tc := range bad {
		files["bad_"+name+".lua"] = taskRule("bad_"+name, tc.args)
	}
	s := load(t, newDir(t, files))
	for _, st := range s.Status() {
		require.Empty(t, st.Error, st.File)
	}
	run := func(rule string, ctx context.Context, submit engine.SubmitFunc) error {
		slot := mustTime(t, "2026-12-01T09:00:00+08:00")
		return s.OnFailed(ctx, rule, engine.RunContext{Rule: rule, Key: "r", Slot: slot.UTC(), Zone: "Asia/Shanghai"},
			engine.FailedDelivery{ID: "d1", Recipient: "alice", State: engine.StateFailed}, submit)
	}
	for name, tc := range good {
		f := &fakeSubmitter{}
		require.NoError(t, run("good_"+name, f.ctx(), f.submit), name)
		got := f.submitted()
		require.Len(t, got, 1, name)
		require.Equal(t, tc.want.Key, got[0].Key, name)
		require.Equal(t, tc.want.Rule, got[0].Rule, name)
		require.True(t, tc.want.DueAt.Equal(got[0].DueAt), "%s: %s", name, got[0].DueAt)
		require.Equal(t, string(tc.want.Data), string(got[0].Data), name)
	}
	for name, tc := range bad {
		f := &fakeSubmitter{}
		err := run("bad_"+name, f.ctx(), f.submit)
		require.ErrorContains(t, err, tc.want, name)
		require.ErrorIs(t, err, ErrRule, name)
		if tc.want != "table expected" {
			require.ErrorContains(t, err, "task.submit: ", name)
		}
		require.Empty(t, f.submitted(), name)
	}

	// Called by something that gives no submitter: nil and the reason.
	err := run("good_after", context.Background(), nil)
	require.ErrorContains(t, err, "no task submitter here")
	// The submitter's own failure: nil and its reason.
	f := &fakeSubmitter{err: errors.New("propose submit-task: not the leader")}
	require.ErrorContains(t, run("good_after", f.ctx(), f.submit), "task.submit: propose submit-task: not the leader")
}

// TestTaskSubmitOnlyInOnFailed: recipients and message run on every
// leader and in preview, the file's top level at every load: none of them
// may submit a task, even with a submitter in the context.
func TestTaskSubmitOnlyInOnFailed(t *testing.T) {
	t.Parallel()
	call := `task.submit { key = "k", rule = "r", after = "1m" }`
	files := map[string]string{
		"in_recipients.lua": `return rule {
  name = "in_recipients", channel = "mock",
  recipients = function(run) ` + call + ` return { "a" } end,
  message = function(run, to) return { content = "x" } end,
}`,
		"in_message.lua": `return rule {
  name = "in_message", channel = "mock",
  recipients = function(run) return { "a" } end,
  message = function(run, to) ` + call + ` return { content = "x" } end,
}`,
		"top.lua": call + "\n" + simpleRule("top", "return {}"),
		// The file's top level runs again before on_failed: still refused.
		"top_failed.lua": `local ok = pcall(function() ` + call + ` end)
return rule {
  name = "top_failed", channel = "mock",
  recipients = function(run) return {} end,
  message = function(run, to) return {} end,
  on_failed = function(run, d) if ok then error("the top level submitted") end end,
}`,
	}
	s := load(t, newDir(t, files))
	f := &fakeSubmitter{}
	for _, rule := range []string{"in_recipients", "in_message"} {
		_, err := s.Plan(f.ctx(), rule, engine.RunContext{Rule: rule, Key: "k", Slot: time.Now()})
		require.ErrorContains(t, err, "task.submit is only available in on_failed", rule)
		_, err = s.Preview(f.ctx(), rule, time.Now(), nil)
		require.ErrorContains(t, err, "task.submit is only available in on_failed", rule)
	}
	st, ok := statusOf(s, "top.lua")
	require.True(t, ok)
	require.Contains(t, st.Error, "task.submit is only available in on_failed")
	require.Equal(t, 1, st.Line)
	require.NoError(t, s.OnFailed(f.ctx(), "top_failed", engine.RunContext{Key: "k", Slot: time.Now()}, engine.FailedDelivery{ID: "d"}, f.submit))
	require.Empty(t, f.submitted())

	// Nor can a rule replace the module for the next run.
	s = load(t, newDir(t, map[string]string{"r.lua": exprRule("r", `(function() task.submit = nil end)()`)}))
	_, err := plan(t, s, "r", "")
	require.ErrorContains(t, err, "cannot change a library table")
}

// TestTaskSubmitKeyDeterministic: two leaders running the same hook for
// the same delivery submit byte-identical tasks, whatever order Lua keeps
// the data's fields in.
func TestTaskSubmitKeyDeterministic(t *testing.T) {
	t.Parallel()
	var fields []string
	for i := range 40 {
		fields = append(fields, fmt.Sprintf("f%d = %d", i, i))
	}
	src := taskRule("r", `{ key = run.key .. "-" .. d.id, rule = "r", after = "1h", data = { `+strings.Join(fields, ", ")+` } }`)
	var first engine.SubmitTask
	for i := range 3 {
		s := load(t, newDir(t, map[string]string{"r.lua": src}))
		f := &fakeSubmitter{}
		require.NoError(t, s.OnFailed(f.ctx(), "r", engine.RunContext{Key: "task:x", Slot: mustTime(t, "2026-12-01T09:00:00Z")}, engine.FailedDelivery{ID: "d9"}, f.submit))
		got := f.submitted()
		require.Len(t, got, 1)
		if i == 0 {
			first = got[0]
			require.Equal(t, "task:x-d9", first.Key)
			continue
		}
		require.Equal(t, first, got[0])
	}
}

// TestTaskSubmitDotKeys: "." and ".." are refused from Lua as the API
// refuses them: a URL path cleans them away (/v1/tasks/.. is /v1/), so a
// task an on_failed hook made under such a key could never be read or
// cancelled by URL.
func TestTaskSubmitDotKeys(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"target.lua":  simpleRule("target", "return {}"),
		"dot.lua":     taskRule("dot", `{ key = ".", rule = "target", after = "1m" }`),
		"dotdot.lua":  taskRule("dotdot", `{ key = "..", rule = "target", after = "1m" }`),
		"dotted.lua":  taskRule("dotted", `{ key = "...", rule = "target", after = "1m" }`),
		"dotname.lua": taskRule("dotname", `{ key = "a..b", rule = "target", after = "1m" }`),
	}
	s := load(t, newDir(t, files))
	run := func(rule string, submit engine.SubmitFunc) error {
		return s.OnFailed(context.Background(), rule, engine.RunContext{Rule: rule, Key: "r", Slot: mustTime(t, "2026-12-01T09:00:00+08:00")},
			engine.FailedDelivery{ID: "d1", Recipient: "alice", State: engine.StateFailed}, submit)
	}
	for rule, key := range map[string]string{"dot": ".", "dotdot": ".."} {
		f := &fakeSubmitter{}
		err := run(rule, f.submit)
		require.ErrorIs(t, err, ErrRule, rule)
		require.ErrorContains(t, err, fmt.Sprintf("task.submit: key: %q cannot be a key (it goes in URLs)", key), rule)
		require.Empty(t, f.submitted(), rule)
	}
	// Only the whole key: dots inside a longer one survive a URL.
	for _, rule := range []string{"dotted", "dotname"} {
		f := &fakeSubmitter{}
		require.NoError(t, run(rule, f.submit), rule)
		require.Len(t, f.submitted(), 1, rule)
	}
}
