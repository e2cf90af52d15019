package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/calendar"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/schedule"
)

// Bad requests: each gets a 4xx with a JSON reason, never a 500, a panic
// or a silent success.

// send is do with headers and a body reader.
func (b *apiBundle) send(t *testing.T, method, target string, body io.Reader, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, body)
	req.RemoteAddr = "127.0.0.1:40000" // a local client: no tokens are configured
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	return rec
}

func jsonBody(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"), rec.Body.String())
	var out map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), rec.Body.String())
	require.NotEmpty(t, out["error"], rec.Body.String())
	return out
}

func TestWrongMethodIs405WithAllow(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	tests := []struct{ method, target, allow string }{
		{http.MethodDelete, "/v1/status", "GET, HEAD"},
		{http.MethodPost, "/v1/status", "GET, HEAD"},
		{http.MethodPut, "/v1/tasks", "GET, HEAD, POST"},
		{http.MethodPost, "/v1/tasks/k", "DELETE, GET, HEAD, PUT"},
		{http.MethodGet, "/v1/rules/daily/fire", "POST"},
		{http.MethodGet, "/v1/alerts/x/ack", "POST"},
		{http.MethodPost, "/metrics", "GET, HEAD"},
		{http.MethodPost, "/ui/app.js", "GET, HEAD"},
		{http.MethodPost, "/", "GET, HEAD"},
	}
	for _, tc := range tests {
		rec := b.send(t, tc.method, tc.target, nil)
		require.Equal(t, http.StatusMethodNotAllowed, rec.Code, "%s %s", tc.method, tc.target)
		require.Equal(t, tc.allow, rec.Header().Get("Allow"), "%s %s", tc.method, tc.target)
		require.Contains(t, jsonBody(t, rec)["error"], tc.allow)
	}
	for _, target := range []string{"/nope", "/v1/nope", "/v1/tasks/k/x", "/v2/status"} {
		rec := b.send(t, http.MethodGet, target, nil)
		require.Equal(t, http.StatusNotFound, rec.Code, target)
		require.Empty(t, rec.Header().Get("Allow"), target)
		require.Contains(t, jsonBody(t, rec)["error"], "no such endpoint")
	}
}

// The zero instant parses as RFC 3339 but the state machine refuses it:
// it was a 500.
func TestTaskDueAtZeroIs400(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	for _, due := range []string{"0001-01-01T00:00:00Z", "0001-01-01T08:00:00+08:00"} {
		code, out := b.do(t, http.MethodPost, "/v1/tasks", `{"key":"k","rule":"enquiry_timeout","due_at":"`+due+`"}`)
		require.Equal(t, http.StatusBadRequest, code, out)
		require.Equal(t, "due_at", out["field"])
		// The reason says what is wrong with it, not which forms are
		// wanted: it is in one of them.
		require.Contains(t, out["error"], "zero time", out)
	}
}

// A key "." or ".." is created but can never be read or cancelled: the
// router cleans it out of /v1/tasks/{key} and redirects.
func TestTaskKeyDotSegmentsRefused(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	for _, key := range []string{".", ".."} {
		code, out := b.do(t, http.MethodPost, "/v1/tasks", `{"key":"`+key+`","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`)
		require.Equal(t, http.StatusBadRequest, code, out)
		require.Equal(t, "key", out["field"])
	}
	// Other unusual keys go through and can be read back by their escaped
	// path, as the CLI sends it.
	for _, key := range []string{"询价-8812", "a.b", "...", "a+b", "x:y@z"} {
		code, out := b.do(t, http.MethodPost, "/v1/tasks", `{"key":"`+key+`","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`)
		require.Equal(t, http.StatusCreated, code, out)
		code, out = b.do(t, http.MethodGet, "/v1/tasks/"+pathEscape(key), "")
		require.Equal(t, http.StatusOK, code, key)
		require.Equal(t, key, out["key"])
	}
}

func TestTaskBodyTrailingDataRefused(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	ok := `{"key":"k","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`
	for _, body := range []string{ok + " x", ok + "}", ok + ok, ok + `{"key":"k2"}`} {
		code, out := b.do(t, http.MethodPost, "/v1/tasks", body)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Equal(t, "body", out["field"], body)
	}
	_, found := b.node.FSM.Task("k")
	require.False(t, found)
	code, _ := b.do(t, http.MethodPost, "/v1/tasks", ok+" \n")
	require.Equal(t, http.StatusCreated, code, "trailing space is fine")
}

// endless is a body that never ends; it counts what was read of it.
type endless struct {
	head []byte
	read atomic.Int64
}

func (e *endless) Read(p []byte) (int, error) {
	off := e.read.Load()
	n := 0
	for n < len(p) {
		if i := off + int64(n); i < int64(len(e.head)) {
			p[n] = e.head[i]
		} else {
			p[n] = 'a'
		}
		n++
	}
	e.read.Add(int64(n))
	return n, nil
}

// A huge body is refused with 413 after reading a bounded prefix of it.
func TestTaskBodyTooLargeIs413(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	body := &endless{head: []byte(`{"key":"k","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00","data":{"x":"`)}
	rec := b.send(t, http.MethodPost, "/v1/tasks", body, "Content-Type", "application/json")
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
	require.Contains(t, jsonBody(t, rec)["error"], "KiB")
	require.Less(t, body.read.Load(), int64(1<<20), "the body is not read to its end")

	body = &endless{head: []byte(`{"slot":"`)}
	rec = b.send(t, http.MethodPost, "/v1/rules/daily/fire", body)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
	require.Less(t, body.read.Load(), int64(1<<20))
}

func TestWrongContentTypeIs415(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	body := `{"key":"k","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml", "json"} {
		rec := b.send(t, http.MethodPost, "/v1/tasks", strings.NewReader(body), "Content-Type", ct)
		require.Equal(t, http.StatusUnsupportedMediaType, rec.Code, ct)
		require.Contains(t, jsonBody(t, rec)["error"], "application/json", ct)
		rec = b.send(t, http.MethodPost, "/v1/rules/daily/fire", strings.NewReader(`{}`), "Content-Type", ct)
		require.Equal(t, http.StatusUnsupportedMediaType, rec.Code, ct)
	}
	_, found := b.node.FSM.Task("k")
	require.False(t, found)
	require.Empty(t, b.node.FSM.Runs(nil))
	for i, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON", ""} {
		key := "k" + string(rune('a'+i))
		rec := b.send(t, http.MethodPost, "/v1/tasks", strings.NewReader(strings.Replace(body, `"k"`, `"`+key+`"`, 1)), "Content-Type", ct)
		require.Equal(t, http.StatusCreated, rec.Code, "%q: %s", ct, rec.Body.String())
	}
}

func TestTaskListFromAfterToIs400(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	code, out := b.do(t, http.MethodGet, "/v1/tasks?from=2026-12-02T00:00:00%2B08:00&to=2026-12-01T00:00:00Z", "")
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Equal(t, "to", out["field"])
	code, _ = b.do(t, http.MethodGet, "/v1/tasks?from=2026-12-01T00:00:00Z&to=2026-12-01T00:00:00Z", "")
	require.Equal(t, http.StatusOK, code, "an empty range is a range")
	code, _ = b.do(t, http.MethodGet, "/v1/tasks?from=2026-12-01T00:00:00Z", "")
	require.Equal(t, http.StatusOK, code, "from alone")
	code, _ = b.do(t, http.MethodGet, "/v1/tasks?to=2026-12-01T00:00:00Z", "")
	require.Equal(t, http.StatusOK, code, "to alone")
}

// A task fires its rule under the run key task:KEY, outside the rule's
// slots: a task of a scheduled rule would send the daily report a second
// time that day.
func TestTaskOfScheduledRuleIs400(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	code, out := b.do(t, http.MethodPost, "/v1/tasks", `{"key":"k","rule":"daily","due_at":"2026-12-01T10:15:00+08:00"}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Equal(t, "rule", out["field"])
	require.Contains(t, out["reason"], "/v1/rules/daily/fire")
	_, found := b.node.FSM.Task("k")
	require.False(t, found)
}

// A typo in the fire body used to fire "now" instead of the slot meant.
func TestFireRefusesUnknownFieldsAndTrailingData(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	code, out := b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{"slott":"2026-11-30T09:00:00+08:00"}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Equal(t, "slott", out["field"])
	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{"slot":"2026-11-30T09:00:00+08:00"} {"slot":"2026-11-29T09:00:00+08:00"}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Equal(t, "body", out["field"])
	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/fire", `["2026-11-30T09:00:00+08:00"]`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Empty(t, b.node.FSM.Runs(nil), "nothing fired")

	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/fire", ``)
	require.Equal(t, http.StatusCreated, code, "no body fires now: %v", out)
	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{}`)
	require.Equal(t, http.StatusConflict, code, "{} fires now too, the same second: %v", out)
}

// A slot older than the ledger's memory may have fired, been pruned and
// been forgotten: firing it by hand would send it a second time.
func TestFireRefusesSlotsTheLedgerForgot(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	apply := func(ct engine.CommandType, body any) any { return b.apply(t, ct, body) }
	slot := time.Date(2026, 6, 1, 1, 0, 0, 0, time.UTC) // 09:00 Shanghai, six months before now0
	key := engine.RunKey("daily", slot)
	require.Nil(t, apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: "daily", Slot: slot, Zone: "Asia/Shanghai", Now: slot}))
	require.Nil(t, apply(engine.CmdFinishPlan, engine.FinishPlan{RunKey: key, Now: slot}))
	apply(engine.CmdPrune, engine.Prune{Before: now0.Add(-engine.RetentionDefault), LedgerBefore: now0.Add(-engine.LedgerRetentionDefault), Now: now0})
	_, found := b.node.FSM.Run(key)
	require.False(t, found, "the run and its ledger entry are gone")

	code, out := b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{"slot":"2026-06-01T09:00:00+08:00"}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Equal(t, "slot", out["field"])
	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{"slot":"0001-01-01T00:00:00Z"}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Empty(t, b.node.FSM.Runs(nil))

	// Within the horizon a backfill still works.
	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{"slot":"2026-11-01T09:00:00+08:00"}`)
	require.Equal(t, http.StatusCreated, code, out)
}

// failing answers every write with err.
type failing struct{ err error }

func (f failing) Apply(context.Context, []byte) (any, error) { return nil, f.err }
func (f failing) VerifyLeader(context.Context) error         { return f.err }

// Writes on a node that cannot take them (a follower with forwarding off,
// an election, a timeout) answer 503 with a reason, never 500, 404 or a
// panic.
func TestWritesWithoutLeaderAre503(t *testing.T) {
	t.Parallel()
	fsm := engine.NewFSM()
	cmd, err := engine.Encode(engine.CmdRaiseAlert, engine.RaiseAlert{Cause: "c", Message: "m", Now: now0})
	require.NoError(t, err)
	fsm.Apply(1, 1, cmd)
	alert := fsm.Alerts()[0].ID
	// A fire without a slot is a new run each time: its 503 says it may
	// have fired, not "try again".
	writes := []struct{ method, target, body, want string }{
		{http.MethodPost, "/v1/tasks", `{"key":"k","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`, "try again"},
		{http.MethodDelete, "/v1/tasks/k", "", "try again"},
		{http.MethodPost, "/v1/rules/daily/fire", "", "it may have fired; look at GET /v1/runs?rule=daily before firing again"},
		{http.MethodPost, "/v1/rules/daily/fire", `{"slot":"2026-12-01T09:00:00+08:00"}`, "try again"},
		{http.MethodPost, "/v1/alerts/" + alert + "/ack", "", "try again"},
	}
	for name, rep := range map[string]engine.Replicator{
		"none":       nil,
		"follower":   failing{engine.ErrNotLeader},
		"wrapped":    failing{errors.Join(errors.New("raft"), engine.ErrNotLeader)},
		"timeout":    failing{context.DeadlineExceeded},
		"client-end": failing{context.Canceled},
	} {
		b := &apiBundle{h: api.New(api.Config{Hosts: testHosts, FSM: fsm, Replicator: rep, Rules: taskRules, NowFunc: func() time.Time { return now0 },
			StatusFunc: func() api.Status { return api.Status{} }})}
		for _, wr := range writes {
			rec := b.send(t, wr.method, wr.target, strings.NewReader(wr.body))
			require.Equal(t, http.StatusServiceUnavailable, rec.Code, "%s: %s %s: %s", name, wr.method, wr.target, rec.Body.String())
			require.Contains(t, jsonBody(t, rec)["error"], wr.want, "%s: %s %s", name, wr.method, wr.target)
		}
	}
	require.False(t, fsm.Alerts()[0].Acked)

	// An unknown alert is still a 404 where a write would go through.
	b := setupAPI(t)
	code, out := b.do(t, http.MethodPost, "/v1/alerts/nope/ack", "")
	require.Equal(t, http.StatusNotFound, code, out)
}

// Two identical submissions at once: one creates, the other finds it.
// Two different bodies at once: one creates, the other conflicts.
func TestConcurrentSubmissionsOfOneKey(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	submit := func(bodies ...string) []int {
		codes := make([]int, len(bodies))
		start := make(chan struct{})
		done := make(chan struct{})
		for i, body := range bodies {
			go func() {
				defer func() { done <- struct{}{} }()
				<-start
				codes[i] = b.send(t, http.MethodPost, "/v1/tasks", strings.NewReader(body)).Code
			}()
		}
		close(start)
		for range bodies {
			<-done
		}
		return codes
	}
	for i := range 20 {
		key := `"same-` + string(rune('a'+i)) + `"`
		body := `{"key":` + key + `,"rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00","data":{"n":1}}`
		require.ElementsMatch(t, []int{http.StatusCreated, http.StatusOK}, submit(body, body))
		key = `"diff-` + string(rune('a'+i)) + `"`
		body = `{"key":` + key + `,"rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00","data":{"n":1}}`
		require.ElementsMatch(t, []int{http.StatusCreated, http.StatusConflict}, submit(body, strings.Replace(body, `"n":1`, `"n":2`, 1)))
	}
}

// A page elsewhere in the operator's browser must not be able to fire a
// rule, submit a task or ack an alert on a node it can reach (a form or a
// no-cors fetch to 127.0.0.1:8101).
func TestCrossSiteWritesRefused(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	for _, hdr := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Origin", "https://evil.example"}, // an older browser: no Sec-Fetch-Site
	} {
		rec := b.send(t, http.MethodPost, "/v1/rules/daily/fire", nil, hdr...)
		require.Equal(t, http.StatusForbidden, rec.Code, hdr)
		require.Contains(t, jsonBody(t, rec)["error"], "cross-origin", hdr)
		rec = b.send(t, http.MethodPost, "/v1/tasks", strings.NewReader(`{"key":"k","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`), hdr...)
		require.Equal(t, http.StatusForbidden, rec.Code, hdr)
	}
	require.Empty(t, b.node.FSM.Runs(nil))
	_, found := b.node.FSM.Task("k")
	require.False(t, found)

	// Reads from anywhere, the dashboard's own writes, and clients that are
	// not browsers (the CLI, curl, other nodes) go through.
	require.Equal(t, http.StatusOK, b.send(t, http.MethodGet, "/v1/status", nil, "Sec-Fetch-Site", "cross-site").Code)
	require.Equal(t, http.StatusCreated, b.send(t, http.MethodPost, "/v1/rules/daily/fire", strings.NewReader(`{"slot":"2026-11-30T09:00:00+08:00"}`),
		"Sec-Fetch-Site", "same-origin", "Origin", "http://example.com").Code)
	require.Equal(t, http.StatusCreated, b.send(t, http.MethodPost, "/v1/rules/daily/fire", strings.NewReader(`{"slot":"2026-11-29T09:00:00+08:00"}`),
		"Origin", "http://example.com").Code, "same origin as httptest's Host")
	require.Equal(t, http.StatusCreated, b.send(t, http.MethodPost, "/v1/rules/daily/fire", strings.NewReader(`{"slot":"2026-11-28T09:00:00+08:00"}`)).Code)
}

// pathEscape escapes a key for a URL path as the CLI does.
func pathEscape(s string) string { return (&url.URL{Path: s}).EscapedPath() }

// A slot given by hand that is not one of the rule's slots gets a run key
// of its own: the slot meant would fire as well, a second report that day.
func TestFireRefusesTimesOffTheSchedule(t *testing.T) {
	t.Parallel()
	n := enginetest.New()
	cals := calendar.NewRegistry()
	b := &apiBundle{node: n, h: api.New(api.Config{Hosts: testHosts,
		FSM: n.FSM, Replicator: n, Rules: taskRules, NowFunc: func() time.Time { return now0 },
		StatusFunc: func() api.Status { return api.Status{} },
		ScheduleFunc: func(r engine.Rule) (engine.Schedule, error) {
			return schedule.New(schedule.Spec{Cron: r.Schedule, Timezone: r.Timezone, Calendar: r.Calendar, Shift: r.Shift}, cals)
		},
	})}
	for _, slot := range []string{"2026-11-30T09:00:30+08:00", "2026-11-30T09:00:00.5+08:00", "2026-11-30T09:00:00Z"} {
		code, out := b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{"slot":"`+slot+`"}`)
		require.Equal(t, http.StatusBadRequest, code, out)
		require.Equal(t, "slot", out["field"])
		require.Contains(t, out["reason"], "not a slot of rule daily", slot)
	}
	_, out := b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{"slot":"2026-11-30T09:00:30+08:00"}`)
	require.Contains(t, out["reason"], "2026-12-01T09:00:00+08:00", "the reason names the next slot")
	require.Empty(t, n.FSM.Runs(nil))

	code, out := b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{"slot":"2026-11-30T01:00:00Z"}`)
	require.Equal(t, http.StatusCreated, code, "09:00 in Shanghai, written in UTC: %v", out)
	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/fire", ``)
	require.Equal(t, http.StatusCreated, code, "no slot: an extra run now, as documented: %v", out)
}

// In a query string "+" means a space, so an offset typed as in the docs
// (from=2026-12-01T09:00:00+08:00, with curl or a browser's address bar)
// arrives as "2026-12-01T09:00:00 08:00". It is read as the "+" meant.
func TestTaskListQueryOffsetWithUnescapedPlus(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	for i, due := range []string{"2026-12-01T10:59:00+08:00", "2026-12-01T11:00:00+08:00", "2026-12-01T11:30:00+08:00"} {
		code, out := b.do(t, http.MethodPost, "/v1/tasks", `{"key":"k`+string(rune('a'+i))+`","rule":"enquiry_timeout","due_at":"`+due+`"}`)
		require.Equal(t, http.StatusCreated, code, out)
	}
	code, out := b.do(t, http.MethodGet, "/v1/tasks?from=2026-12-01T11:00:00+08:00&to=2026-12-01T11:30:00+08:00", "")
	require.Equal(t, http.StatusOK, code, out)
	tasks := out["tasks"].([]any)
	require.Len(t, tasks, 1)
	require.Equal(t, "kb", tasks[0].(map[string]any)["key"])
	code, _ = b.do(t, http.MethodGet, "/v1/tasks?from=2026-12-01T11:00:00%2B08:00", "")
	require.Equal(t, http.StatusOK, code)
	for _, bad := range []string{"2026-12-01T09:00:00", "2026-12-01 09:00:00+08:00", "2026-12-01T09:00:00 0800", "tomorrow"} {
		code, out = b.do(t, http.MethodGet, "/v1/tasks?from="+url.QueryEscape(bad), "")
		require.Equal(t, http.StatusBadRequest, code, bad)
		require.Equal(t, "from", out["field"], bad)
	}
}

// TestBadLimitNamesItsField: every list's bad limit is a 400 that names
// the field, as every other bad query parameter is.
func TestBadLimitNamesItsField(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	for _, target := range []string{"/v1/runs", "/v1/deliveries", "/v1/tasks"} {
		for _, limit := range []string{"0", "-1", "abc", "99999999"} {
			code, out := b.do(t, http.MethodGet, target+"?limit="+limit, "")
			require.Equal(t, http.StatusBadRequest, code, "%s %s: %v", target, limit, out)
			require.Equal(t, "limit", out["field"], "%s %s: %v", target, limit, out)
		}
	}
}

// TestUnknownQueryParameterIs400: a list asked with a parameter it does
// not know (a typo: status for state) is refused, never answered as if
// unfiltered, which an operator would read as the filtered list.
func TestUnknownQueryParameterIs400(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	for target, want := range map[string]string{
		"/v1/deliveries?rule=daily&status=failed": "status",
		"/v1/runs?rules=daily":                    "rules",
		"/v1/tasks?State=pending":                 "State",
		"/v1/stats?day=2026-12-01":                "day",
		"/v1/alerts?acked=false":                  "acked",
		"/v1/audit?actr=root":                     "actr",
	} {
		code, out := b.do(t, http.MethodGet, target, "")
		require.Equal(t, http.StatusBadRequest, code, "%s: %v", target, out)
		require.Equal(t, want, out["field"], "%s: %v", target, out)
		require.Contains(t, out["error"], "unknown parameter", target)
	}
	// What each list knows, and ?pretty=1, still work.
	for _, target := range []string{
		"/v1/deliveries?rule=daily&run=r&state=failed&recipient=lina&date=2026-12-01&limit=5&pretty=1",
		"/v1/runs?rule=daily&limit=5", "/v1/tasks?rule=r&state=pending&from=2026-12-01T00:00:00Z&to=2026-12-02T00:00:00Z&limit=5",
		"/v1/stats?date=2026-12-01", "/v1/alerts", "/v1/audit?actor=root&limit=5&pretty=1",
	} {
		code, out := b.do(t, http.MethodGet, target, "")
		require.Equal(t, http.StatusOK, code, "%s: %v", target, out)
	}
}
