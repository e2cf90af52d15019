package main

import (
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// The task, alerts and `rules fire` commands run in-process against a real
// API handler (engine/api) over a state machine that a stub replicator
// applies to directly: the HTTP, the JSON and the CLI's wording are real,
// Raft is not.

// cliNode is a one-node log under the API (RefuseNext plays a cluster
// between leaders).
type cliNode struct{ *enginetest.Replicator }

// apply replicates one command as the engine's leader would, and fails the
// test if the state machine refuses it.
func (n *cliNode) apply(t *testing.T, ct engine.CommandType, body any) any {
	t.Helper()
	res := n.MustApply(t, ct, body)
	if e, ok := res.(error); ok {
		require.NoError(t, e)
	}
	return res
}

// cliRules is a rule set with one rule of each trigger.
var cliRules = enginetest.Rules{SetHash: "h", List: []engine.Rule{
	{Name: "enquiry_timeout", Timezone: "Asia/Shanghai"},
	{Name: "daily_report", Schedule: "0 9 * * *", Timezone: "Asia/Shanghai"},
}}

// cliNow is the API's clock: writes are stamped with it, and a fire
// without --slot fires it.
var cliNow = time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)

// startAPI serves the API of a one-node "cluster" and returns its
// address (host:port, as --addr takes it).
func startAPI(t *testing.T) (string, *cliNode) {
	t.Helper()
	n := &cliNode{enginetest.New()}
	srv := httptest.NewServer(api.New(api.Config{
		FSM: n.FSM, Replicator: n, Rules: cliRules, NowFunc: func() time.Time { return cliNow },
		StatusFunc: func() api.Status { return api.Status{} },
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), n
}

// deadAddr is an address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// local is how the CLI shows a time.
func local(s string) string {
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return shortTime(at)
}

// shortTime is how the CLI shows a time with no --tz or HERALD_TZ.
func shortTime(t time.Time) string { return engine.ShowTime(t, time.Local) }

func TestTaskSubmitCmd(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	submit := func(args ...string) (string, error) {
		return runHerald(t, append([]string{"task", "submit", "--addr", addr}, args...)...)
	}

	out, err := submit("enq-1", "--rule", "enquiry_timeout", "--due", "2026-12-01T10:15:00+08:00", "--data", `{"b":1,"a":"x"}`)
	require.NoError(t, err)
	require.Equal(t, "task enq-1: rule enquiry_timeout due "+local("2026-12-01T10:15:00+08:00")+" (pending)\n", out)
	task, ok := node.FSM.Task("enq-1")
	require.True(t, ok)
	require.Equal(t, `{"a":"x","b":1}`, string(task.Data))
	require.True(t, task.SubmittedAt.Equal(cliNow))

	// The same key and body (other spacing, key order and offset): the
	// task that exists, unchanged.
	out, err = submit("enq-1", "--rule", "enquiry_timeout", "--due", "2026-12-01T02:15:00Z", "--data", `{ "a": "x", "b": 1 }`, "--json")
	require.NoError(t, err)
	var view api.TaskView
	require.NoError(t, json.Unmarshal([]byte(out), &view))
	require.Equal(t, "enq-1", view.Key)
	require.Equal(t, "pending", view.State)
	require.JSONEq(t, `{"a":"x","b":1}`, string(view.Data))
	tasks, _ := node.FSM.ListTasks(engine.TaskFilter{Limit: 10})
	require.Len(t, tasks, 1)

	// The same key with another body: 409, naming what differs.
	_, err = submit("enq-1", "--rule", "enquiry_timeout", "--due", "2026-12-01T10:30:00+08:00", "--data", `{"b":2,"a":"x"}`)
	require.ErrorContains(t, err, `task "enq-1" exists with a different due_at, data (HTTP 409)`)
	task, _ = node.FSM.Task("enq-1")
	require.Equal(t, `{"a":"x","b":1}`, string(task.Data), "the stored task is unchanged")

	// --data from a file.
	file := filepath.Join(t.TempDir(), "follow.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"owner":"wangfang"}`), 0o644))
	_, err = submit("enq-2", "--rule", "enquiry_timeout", "--due", "2026-12-01T11:00:00+08:00", "--data", "@"+file)
	require.NoError(t, err)
	task, _ = node.FSM.Task("enq-2")
	require.Equal(t, `{"owner":"wangfang"}`, string(task.Data))

	// --in counts from this machine's clock.
	before := time.Now()
	_, err = submit("enq-3", "--rule", "enquiry_timeout", "--in", "15m")
	require.NoError(t, err)
	after := time.Now()
	task, _ = node.FSM.Task("enq-3")
	require.False(t, task.DueAt.Before(before.Add(15*time.Minute).Truncate(time.Second)), task.DueAt)
	require.False(t, task.DueAt.After(after.Add(15*time.Minute)), task.DueAt)
}

// TestTaskSubmitReplace: --replace moves a pending task (PUT), submits a
// key not known yet, and is refused once the task was cancelled.
func TestTaskSubmitReplace(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	submit := func(args ...string) (string, error) {
		return runHerald(t, append([]string{"task", "submit", "--addr", addr}, args...)...)
	}
	_, err := submit("enq-9", "--rule", "enquiry_timeout", "--due", "2026-12-01T10:15:00+08:00", "--replace")
	require.NoError(t, err, "an unknown key with --rule is submitted")
	_, err = submit("enq-9", "--rule", "enquiry_timeout", "--due", "2026-12-01T10:45:00+08:00", "--data", `{"n":2}`)
	require.ErrorContains(t, err, "HTTP 409", "without --replace a second submit is refused")
	out, err := submit("enq-9", "--due", "2026-12-01T10:45:00+08:00", "--data", `{"n":2}`, "--replace")
	require.NoError(t, err)
	require.Contains(t, out, "task enq-9: rule enquiry_timeout due "+local("2026-12-01T10:45:00+08:00"))
	task, _ := node.FSM.Task("enq-9")
	require.Equal(t, `{"n":2}`, string(task.Data))
	_, err = runHerald(t, "task", "cancel", "enq-9", "--addr", addr)
	require.NoError(t, err)
	_, err = submit("enq-9", "--due", "2026-12-01T11:00:00+08:00", "--replace")
	require.ErrorContains(t, err, "is cancelled")
	require.ErrorContains(t, err, "HTTP 409")
}

// TestTaskSubmitInZero: --in 0s is "now", given; not "neither given".
func TestTaskSubmitInZero(t *testing.T) {
	t.Parallel()
	addr, _ := startAPI(t)
	_, err := runHerald(t, "task", "submit", "k", "--rule", "enquiry_timeout", "--in", "0s", "--addr", addr)
	if err != nil {
		require.NotContains(t, err.Error(), "give exactly one")
	}
}

func TestTaskSubmitCmdBadInput(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	due := "2026-12-01T10:15:00+08:00"
	for _, tc := range []struct {
		args []string
		want string
	}{
		// Refused by the API: 400 with the field and the reason.
		{[]string{"a b", "--rule", "enquiry_timeout", "--due", due}, `key: must not contain ' ' (it goes in URLs) (HTTP 400)`},
		{[]string{"k", "--rule", "nope", "--due", due}, `rule: no rule named "nope" is loaded (HTTP 400)`},
		{[]string{"k", "--rule", "enquiry_timeout", "--due", "tomorrow"}, `--due: "tomorrow" is not a time: want RFC 3339`},
		{[]string{"k", "--rule", "enquiry_timeout", "--due", "2026-12-01T10:15:00"}, `--due: "2026-12-01T10:15:00" is not a time`},
		{[]string{"k", "--rule", "enquiry_timeout", "--due", due, "--data", "[1]"}, "data: want a JSON object"},
		{[]string{"k", "--rule", "enquiry_timeout", "--due", due, "--data", "{nope"}, "--data: not valid JSON"},
		{[]string{"alert:x", "--rule", "enquiry_timeout", "--due", due}, `key: keys starting with "alert:" are Herald's own`},
		// Refused by the CLI before it asks.
		{[]string{"k", "--rule", "enquiry_timeout"}, "give exactly one of --due TIME and --in DURATION"},
		{[]string{"k", "--rule", "enquiry_timeout", "--due", due, "--in", "5m"}, "give exactly one of --due TIME and --in DURATION"},
		{[]string{"k", "--rule", "enquiry_timeout", "--due", due, "--in", "0s"}, "give exactly one of --due TIME and --in DURATION"},
		{[]string{"k", "--due", due}, `--rule is required`},
		{[]string{"k", "--rule", "enquiry_timeout", "--due", due, "--data", "@" + filepath.Join(t.TempDir(), "missing.json")}, "--data: open "},
		{[]string{"--rule", "enquiry_timeout", "--due", due}, "accepts 1 arg(s), received 0"},
	} {
		_, err := runHerald(t, append([]string{"task", "submit", "--addr", addr}, tc.args...)...)
		require.ErrorContains(t, err, tc.want, tc.args)
	}
	tasks, _ := node.FSM.ListTasks(engine.TaskFilter{Limit: 10})
	require.Empty(t, tasks)
}

// TestTaskCmdsRetryWhileElecting: a write answered 503 (no leader yet) is
// asked again until a leader takes it, or --timeout passes.
func TestTaskCmdsRetryWhileElecting(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	node.RefuseNext(2)
	out, err := runHerald(t, "task", "submit", "k", "--addr", addr, "--rule", "enquiry_timeout", "--due", "2026-12-01T10:15:00+08:00")
	require.NoError(t, err)
	require.Contains(t, out, "task k: rule enquiry_timeout")
	require.Equal(t, 2, node.Refused(), "refused twice, then taken")

	node.RefuseNext(1 << 20)
	start := time.Now()
	_, err = runHerald(t, "task", "cancel", "k", "--addr", addr, "--timeout", "300ms")
	require.ErrorContains(t, err, "no leader to take the write; try again (HTTP 503)")
	require.Less(t, time.Since(start), 10*time.Second)
	task, _ := node.FSM.Task("k")
	require.Equal(t, engine.TaskPending, task.State)
}

// fire starts the run of task key and plans one delivery to each of
// recipients, as the leader's scheduler and planner would.
func fire(t *testing.T, node *cliNode, key string, recipients ...string) string {
	t.Helper()
	run := engine.TaskRunKey(key)
	task, ok := node.FSM.Task(key)
	require.True(t, ok)
	node.apply(t, engine.CmdStartRun, engine.StartRun{Key: run, Rule: task.Rule, Slot: task.DueAt, TaskKey: key, Data: task.Data, Now: cliNow})
	var ds []engine.NewDelivery
	for _, r := range recipients {
		ds = append(ds, engine.NewDelivery{ID: engine.DeliveryID(run, r), Recipient: r, Channel: "mock", NotBefore: task.DueAt})
	}
	node.apply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: run, Deliveries: ds})
	return run
}

// send claims and settles delivery id as sent.
func send(t *testing.T, node *cliNode, id string) {
	t.Helper()
	c := node.apply(t, engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{id}, Leader: "n1", Now: cliNow, Timeout: time.Minute}).(engine.ClaimResult)
	require.Len(t, c.Claimed, 1)
	node.apply(t, engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: cliNow, Results: []engine.Settlement{{ID: id, Seq: c.Claimed[0].Seq, Status: heraldtype.StatusSent}}})
}

func TestTaskGetCmd(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	_, err := runHerald(t, "task", "submit", "enq-1", "--addr", addr, "--rule", "enquiry_timeout", "--due", "2026-12-01T10:00:00+08:00", "--data", `{"assignee":"liuyang"}`)
	require.NoError(t, err)

	out, err := runHerald(t, "task", "get", "enq-1", "--addr", addr)
	require.NoError(t, err)
	for _, want := range []string{"key        enq-1\n", "rule       enquiry_timeout\n", "due        " + local("2026-12-01T10:00:00+08:00") + "\n",
		"state      pending\n", "submitted  " + shortTime(cliNow) + "\n", `data       {"assignee":"liuyang"}` + "\n"} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "run ")

	run := fire(t, node, "enq-1", "liuyang", "lina")
	send(t, node, engine.DeliveryID(run, "liuyang"))
	out, err = runHerald(t, "task", "get", "enq-1", "--addr", addr)
	require.NoError(t, err)
	require.Contains(t, out, "state       fired\n")
	require.Contains(t, out, "fired       "+shortTime(cliNow)+"\n")
	require.Contains(t, out, "run         task:enq-1 (")
	require.Contains(t, out, "deliveries  1 pending, 1 sent\n")

	out, err = runHerald(t, "task", "get", "enq-1", "--addr", addr, "--json")
	require.NoError(t, err)
	var view api.TaskView
	require.NoError(t, json.Unmarshal([]byte(out), &view))
	require.Equal(t, map[string]int{"pending": 1, "sent": 1}, view.Deliveries)
	require.Equal(t, "task:enq-1", view.Run)

	_, err = runHerald(t, "task", "get", "nope", "--addr", addr)
	require.ErrorContains(t, err, "no task nope (HTTP 404)")
	// A key that needs escaping in a URL reaches the API intact.
	_, err = runHerald(t, "task", "get", "a/b?c", "--addr", addr)
	require.ErrorContains(t, err, "no task a/b?c (HTTP 404)")
}

func TestTaskCancelCmd(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	for _, k := range []string{"enq-1", "enq-2", "enq-3"} {
		_, err := runHerald(t, "task", "submit", k, "--addr", addr, "--rule", "enquiry_timeout", "--due", "2026-12-01T10:00:00+08:00")
		require.NoError(t, err)
	}

	// Pending: cancelled.
	out, err := runHerald(t, "task", "cancel", "enq-1", "--addr", addr)
	require.NoError(t, err)
	require.Equal(t, "task enq-1 cancelled\n", out)
	task, _ := node.FSM.Task("enq-1")
	require.Equal(t, engine.TaskCancelled, task.State)
	out, err = runHerald(t, "task", "get", "enq-1", "--addr", addr)
	require.NoError(t, err)
	require.Contains(t, out, "cancelled  "+shortTime(cliNow)+"\n")

	// Fired, nothing attempted yet: still cancelled, deliveries too.
	run := fire(t, node, "enq-2", "liuyang")
	out, err = runHerald(t, "task", "cancel", "enq-2", "--addr", addr, "--json")
	require.NoError(t, err)
	var view api.TaskView
	require.NoError(t, json.Unmarshal([]byte(out), &view))
	require.Equal(t, "cancelled", view.State)
	require.Equal(t, map[string]int{"cancelled": 1}, view.Deliveries)
	d, _ := node.FSM.Delivery(engine.DeliveryID(run, "liuyang"))
	require.Equal(t, engine.StateCancelled, d.State)

	// Fired and sent: 409, saying what happened.
	run = fire(t, node, "enq-3", "liuyang")
	send(t, node, engine.DeliveryID(run, "liuyang"))
	_, err = runHerald(t, "task", "cancel", "enq-3", "--addr", addr)
	require.ErrorContains(t, err, `task "enq-3" fired at 2026-12-01T02:00:00Z (run task:enq-3) and cannot be cancelled: deliveries 1 sent (HTTP 409)`)

	_, err = runHerald(t, "task", "cancel", "nope", "--addr", addr)
	require.ErrorContains(t, err, "no task nope (HTTP 404)")
}

func TestTaskListCmd(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var keys []string
	for i := range 7 {
		key := "enq-" + string(rune('a'+i))
		keys = append(keys, key)
		node.apply(t, engine.CmdSubmitTask, engine.SubmitTask{Key: key, Rule: "enquiry_timeout", DueAt: base.Add(time.Duration(i) * time.Minute), Now: cliNow})
	}
	node.apply(t, engine.CmdSubmitTask, engine.SubmitTask{Key: "other", Rule: "daily_report", DueAt: base, Now: cliNow})
	node.apply(t, engine.CmdCancelTask, engine.CancelTask{Key: "enq-b", Now: cliNow})
	list := func(args ...string) []string {
		t.Helper()
		out, err := runHerald(t, append([]string{"task", "list", "--addr", addr, "--json"}, args...)...)
		require.NoError(t, err)
		var tasks []api.TaskView
		require.NoError(t, json.Unmarshal([]byte(out), &tasks))
		var got []string
		for _, tv := range tasks {
			got = append(got, tv.Key)
		}
		return got
	}

	out, err := runHerald(t, "task", "list", "--addr", addr, "--json", "--rule", "nope")
	require.NoError(t, err)
	require.Equal(t, "[]\n", out, "an empty list, not null")
	require.Len(t, list(), 8)
	require.Equal(t, keys, list("--rule", "enquiry_timeout"))
	require.Equal(t, []string{"enq-a", "enq-c", "enq-d", "enq-e", "enq-f", "enq-g"}, list("--rule", "enquiry_timeout", "--state", "pending"))
	require.Equal(t, []string{"enq-b"}, list("--state", "cancelled"))
	require.Equal(t, []string{"enq-c", "enq-d"}, list("--rule", "enquiry_timeout", "--from", "2026-12-01T18:02:00+08:00", "--to", "2026-12-01T10:04:00Z"))
	// One page, or every page.
	require.Len(t, list("--rule", "enquiry_timeout", "--limit", "3"), 3)
	require.Equal(t, keys, list("--rule", "enquiry_timeout", "--limit", "3", "--all"))

	out, err = runHerald(t, "task", "list", "--addr", addr, "--state", "cancelled")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	require.Regexp(t, `^KEY\s+RULE\s+DUE\s+STATE\s+DELIVERIES$`, lines[0])
	require.Regexp(t, `^enq-b\s+enquiry_timeout\s+`+regexp.QuoteMeta(shortTime(base.Add(time.Minute)))+`\s+cancelled\s+-$`, lines[1])

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--state", "done"}, "state: want pending, fired or cancelled (HTTP 400)"},
		{[]string{"--from", "yesterday"}, `--from: "yesterday" is not a time`},
		{[]string{"--limit", "5000"}, "(HTTP 400)"},
		{[]string{"extra"}, `unknown command "extra"`},
	} {
		_, err := runHerald(t, append([]string{"task", "list", "--addr", addr}, tc.args...)...)
		require.ErrorContains(t, err, tc.want, tc.args)
	}
}

// TestPreviewTaskRuleCmd: `herald rules preview` of the examples' rules
// triggered by API tasks, with the task's data.
func TestPreviewTaskRuleCmd(t *testing.T) {
	t.Parallel()
	out, err := runHerald(t, "rules", "preview", "enquiry_timeout", "--dir", examplesDir, "--tz", "Asia/Shanghai", "--at", "2026-12-01 10:15",
		"--data", `{"enquiry":"8812","customer":"华东机电","assignee":"liuyang","level":2,"waited":"30m"}`)
	require.NoError(t, err)
	require.Contains(t, out, "trigger: api task\n")
	require.Contains(t, out, "run key: task:preview; deadline 2026-12-01 10:45:00 +08:00\n")
	require.Contains(t, out, "2 recipient(s):\n")
	require.Regexp(t, `2026-12-01 10:15:00 CST \+08:00\s+Asia/Shanghai\s+\+0s\s+liuyang \(刘洋\)\s+\{"content":"客户咨询 #8812（华东机电）已 30m 无人回复`, out)
	require.Regexp(t, `lina \(李娜\)\s+\{"content":"【升级 L2】`, out)

	out, err = runHerald(t, "rules", "preview", "enquiry_timeout", "--dir", examplesDir)
	require.NoError(t, err)
	require.Contains(t, out, "nobody: recipients returned nobody")
	require.Contains(t, out, "rule enquiry_timeout fires by API tasks: preview it with a task's data (--data '{...}')")

	file := filepath.Join(t.TempDir(), "undelivered.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"owner":"wangfang","customer":"华东机电","note":"确认报价","undelivered":true}`), 0o644))
	out, err = runHerald(t, "rules", "preview", "follow_up", "--dir", examplesDir, "--data", "@"+file)
	require.NoError(t, err)
	require.Contains(t, out, "1 recipient(s):\n")
	require.Contains(t, out, "lina (李娜)")
	require.Contains(t, out, "【未送达】发给 王芳 的跟进提醒未能送达")

	_, err = runHerald(t, "rules", "preview", "follow_up", "--dir", examplesDir)
	require.ErrorContains(t, err, "follow_up needs data.owner (rule follow_up fires by API tasks")
	_, err = runHerald(t, "rules", "preview", "follow_up", "--dir", examplesDir, "--data", `["wangfang"]`)
	require.ErrorContains(t, err, "task data must be a JSON object (rules read it as run.data), not an array")
	_, err = runHerald(t, "rules", "preview", "follow_up", "--dir", examplesDir, "--data", `{nope`)
	require.ErrorContains(t, err, "--data: not valid JSON")
}

// A task list answer is bounded at 4 MiB of items by the API; the CLI
// must read one whole (it read 1 MiB and failed with "unexpected end of
// JSON input").
func TestTaskListCmdReadsALargePage(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	blob := strings.Repeat("x", 15<<10)
	data, err := json.Marshal(map[string]string{"a": blob, "b": blob, "c": blob})
	require.NoError(t, err)
	due := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 40 {
		node.apply(t, engine.CmdSubmitTask, engine.SubmitTask{Key: "big-" + strconv.Itoa(i), Rule: "enquiry_timeout", DueAt: due, Data: data, Now: cliNow})
	}
	out, err := runHerald(t, "task", "list", "--addr", addr, "--json", "--limit", "40")
	require.NoError(t, err)
	require.Greater(t, len(out), 1<<20, "the page must be over the old 1 MiB cut")
	var tasks []api.TaskView
	require.NoError(t, json.Unmarshal([]byte(out), &tasks))
	require.Len(t, tasks, 40)
}
