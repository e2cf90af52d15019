package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// taskRules is the rule set of the API tests.
var taskRules = enginetest.Rules{SetHash: "h", List: []engine.Rule{
	{Name: "enquiry_timeout"}, {Name: "daily", Schedule: "0 9 * * *", Timezone: "Asia/Shanghai"}}}

var now0 = time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)

// testHosts is the Host of httptest.NewRequest's requests: the name these
// tests' nodes answer to without tokens (besides loopback ones).
var testHosts = []string{"example.com"}

type apiBundle struct {
	h    http.Handler
	node *enginetest.Replicator
}

func setupAPI(t testing.TB) *apiBundle {
	n := enginetest.New()
	return &apiBundle{node: n, h: api.New(api.Config{Hosts: testHosts,
		FSM: n.FSM, Replicator: n, Rules: taskRules, NowFunc: func() time.Time { return now0 },
		StatusFunc: func() api.Status { return api.Status{} },
	})}
}

// apply applies a command to the bundle's state, as the leader would.
func (b *apiBundle) apply(t *testing.T, ct engine.CommandType, body any) any {
	t.Helper()
	return b.node.MustApply(t, ct, body)
}

func (b *apiBundle) do(t *testing.T, method, target, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.RemoteAddr = "127.0.0.1:40000" // a local client: no tokens are configured
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	var out map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), rec.Body.String())
	return rec.Code, out
}

func TestTasksAPI(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	body := `{"key":"enq-1","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00","data":{"b":1,"a":"x"}}`
	code, out := b.do(t, http.MethodPost, "/v1/tasks", body)
	require.Equal(t, http.StatusCreated, code, out)
	require.Equal(t, "pending", out["state"])

	// Same key and body (other spacing and key order): the existing task.
	code, _ = b.do(t, http.MethodPost, "/v1/tasks", `{"rule":"enquiry_timeout","key":"enq-1","due_at":"2026-12-01T02:15:00Z","data":{"a":"x", "b":1}}`)
	require.Equal(t, http.StatusOK, code)

	// Same key, different body: 409 with the difference.
	code, out = b.do(t, http.MethodPost, "/v1/tasks", strings.Replace(body, `"b":1`, `"b":2`, 1))
	require.Equal(t, http.StatusConflict, code)
	diffs := out["differences"].([]any)
	require.Len(t, diffs, 1)
	require.Equal(t, "data", diffs[0].(map[string]any)["field"])

	code, out = b.do(t, http.MethodGet, "/v1/tasks/enq-1", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "enquiry_timeout", out["rule"])

	code, out = b.do(t, http.MethodDelete, "/v1/tasks/enq-1", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "cancelled", out["state"])
	code, _ = b.do(t, http.MethodDelete, "/v1/tasks/nope", "")
	require.Equal(t, http.StatusNotFound, code)
}

func TestTaskValidation(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	tests := []struct{ body, field string }{
		{`{"rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`, "key"},
		{`{"key":"a b","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`, "key"},
		{`{"key":"k","rule":"nope","due_at":"2026-12-01T10:15:00+08:00"}`, "rule"},
		{`{"key":"k","rule":"enquiry_timeout","due_at":"tomorrow"}`, "due_at"},
		{`{"key":"k","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00"}`, "due_at"},
		{`{"key":"k","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00Z","data":[1]}`, "data"},
		{`{"key":"k","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00Z","when":1}`, "when"},
		{`{"key":7,"rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00Z"}`, "key"},
		{`not json`, "body"},
	}
	for _, tc := range tests {
		code, out := b.do(t, http.MethodPost, "/v1/tasks", tc.body)
		require.Equal(t, http.StatusBadRequest, code, tc.body)
		require.Equal(t, tc.field, out["field"], tc.body)
		require.NotEmpty(t, out["reason"])
	}
}

// TestTaskKeyErrors pins the API's answers to bad keys, which users'
// scripts read, now that the check is engine.CheckTaskKey (shared with
// the Lua task library).
func TestTaskKeyErrors(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	for key, reason := range map[string]string{
		"":                       "required: a key of your choice that names the task (you cancel it by it)",
		strings.Repeat("k", 201): "longer than 200 bytes",
		"alert:x":                `keys starting with "alert:" are Herald's own`,
		".":                      `"." cannot be a key (it goes in URLs)`,
		"..":                     `".." cannot be a key (it goes in URLs)`,
		"a/b":                    `must not contain '/' (it goes in URLs)`,
	} {
		body, err := json.Marshal(map[string]string{"key": key, "rule": "enquiry_timeout", "due_at": "2026-12-01T10:15:00+08:00"})
		require.NoError(t, err)
		w := b.send(t, http.MethodPost, "/v1/tasks", bytes.NewReader(body))
		require.Equal(t, http.StatusBadRequest, w.Code, key)
		want, err := json.Marshal(map[string]string{"error": "key: " + reason, "field": "key", "reason": reason})
		require.NoError(t, err)
		require.JSONEq(t, string(want), w.Body.String(), key)
	}
}

func TestTaskListPagesAndFilters(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	for i := range 25 {
		due := now0.Add(time.Duration(i) * time.Minute).Format(time.RFC3339)
		code, _ := b.do(t, http.MethodPost, "/v1/tasks", `{"key":"k`+string(rune('a'+i))+`","rule":"enquiry_timeout","due_at":"`+due+`"}`)
		require.Equal(t, http.StatusCreated, code)
	}
	b.do(t, http.MethodDelete, "/v1/tasks/ka", "")
	seen := 0
	cursor := ""
	for {
		code, out := b.do(t, http.MethodGet, "/v1/tasks?state=pending&limit=10&cursor="+cursor, "")
		require.Equal(t, http.StatusOK, code)
		seen += len(out["tasks"].([]any))
		next, _ := out["next"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	require.Equal(t, 24, seen)
	to := now0.Add(5 * time.Minute).Format(time.RFC3339)
	_, out := b.do(t, http.MethodGet, "/v1/tasks?from="+now0.Format(time.RFC3339)+"&to="+to, "")
	require.Len(t, out["tasks"].([]any), 5)
	code, out := b.do(t, http.MethodGet, "/v1/tasks?state=done", "")
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "state", out["field"])
}

func TestCancelAfterSentSaysWhatHappened(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	b.do(t, http.MethodPost, "/v1/tasks", `{"key":"k","rule":"enquiry_timeout","due_at":"2026-12-01T02:00:00Z"}`)
	run := engine.TaskRunKey("k")
	apply := func(ct engine.CommandType, body any) any { return b.apply(t, ct, body) }
	apply(engine.CmdStartRun, engine.StartRun{Key: run, Rule: "enquiry_timeout", Slot: now0, TaskKey: "k", Now: now0})
	apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: run, Deliveries: []engine.NewDelivery{{ID: "d1", Recipient: "liuyang", Channel: "mock", NotBefore: now0}}})
	c := apply(engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{"d1"}, Leader: "n1", Now: now0, Timeout: time.Minute}).(engine.ClaimResult)
	apply(engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: now0, Results: []engine.Settlement{{ID: "d1", Seq: c.Claimed[0].Seq, Status: heraldtype.StatusSent}}})

	code, out := b.do(t, http.MethodDelete, "/v1/tasks/k", "")
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, out["error"], "1 sent")
}

func TestFireRuleOncePerSlot(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	code, out := b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{"slot":"2026-11-30T09:00:00+08:00"}`)
	require.Equal(t, http.StatusCreated, code, out)
	require.Equal(t, "daily@2026-11-30T01:00:00Z", out["run"])
	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{"slot":"2026-11-30T01:00:00Z"}`)
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, out["error"], "already fired")
	code, _ = b.do(t, http.MethodPost, "/v1/rules/enquiry_timeout/fire", ``)
	require.Equal(t, http.StatusBadRequest, code)
	code, _ = b.do(t, http.MethodPost, "/v1/rules/nope/fire", ``)
	require.Equal(t, http.StatusNotFound, code)
	// A manual fire leaves the schedule's cursor alone.
	_, ok := b.node.FSM.Cursor("daily")
	require.False(t, ok)
}

func TestStatsAndMetrics(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{"slot":"2026-11-30T09:00:00+08:00"}`)
	code, out := b.do(t, http.MethodGet, "/v1/stats?date=2026-11-30", "")
	require.Equal(t, http.StatusOK, code)
	rules := out["rules"].([]any)
	require.Len(t, rules, 1)
	require.Equal(t, float64(1), rules[0].(map[string]any)["runs"])
	code, _ = b.do(t, http.MethodGet, "/v1/stats?date=30.11.2026", "")
	require.Equal(t, http.StatusBadRequest, code)

	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.True(t, bytes.Contains(rec.Body.Bytes(), []byte(`herald_runs_total{kind="all",rule="daily"} 1`)), rec.Body.String())
	require.True(t, bytes.Contains(rec.Body.Bytes(), []byte(`herald_slot_to_sent_seconds_bucket{rule="daily",le="1"} 0`)))
}

// TestTypedTimeRefusedAlike: every time a person types (a task's due_at,
// a fire's slot, the task list's from and to, the audit trail's since) is
// read the same way, so a bad one is refused with the same reason: the
// forms it takes, and the zone a time without an offset is read in.
func TestTypedTimeRefusedAlike(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	want := `want an RFC 3339 time with offset, like 2026-12-01T09:00:00+08:00, or "2026-12-01 09:00[:00]" in Asia/Shanghai`
	for _, c := range []struct{ method, target, body, field string }{
		{http.MethodPost, "/v1/tasks", `{"key":"k","rule":"enquiry_timeout","due_at":"tomorrow"}`, "due_at"},
		{http.MethodPost, "/v1/rules/daily/fire", `{"slot":"tomorrow"}`, "slot"},
		{http.MethodGet, "/v1/tasks?from=tomorrow", "", "from"},
		{http.MethodGet, "/v1/tasks?to=tomorrow", "", "to"},
		{http.MethodGet, "/v1/audit?since=tomorrow", "", "since"},
	} {
		code, out := b.do(t, c.method, c.target, c.body)
		require.Equal(t, http.StatusBadRequest, code, c.target)
		require.Equal(t, c.field, out["field"], c.target)
		require.Equal(t, want, out["reason"], c.target)
	}
}
