package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/enginetest"
)

// TestDueAtInDisplayZone: due_at "YYYY-MM-DD HH:MM" is read in the node's
// display_timezone; RFC 3339 keeps its own offset.
func TestDueAtInDisplayZone(t *testing.T) {
	t.Parallel()
	sh, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	n := enginetest.New()
	b := &apiBundle{node: n, h: api.New(api.Config{Hosts: testHosts,
		FSM: n.FSM, Replicator: n, Rules: taskRules, NowFunc: func() time.Time { return now0 },
		StatusFunc: func() api.Status { return api.Status{} }, DisplayTimezone: sh.String(),
	})}
	code, out := b.do(t, http.MethodPost, "/v1/tasks", `{"key":"k1","rule":"enquiry_timeout","due_at":"2026-12-01 18:00"}`)
	require.Equal(t, http.StatusCreated, code, out)
	task, ok := n.FSM.Task("k1")
	require.True(t, ok)
	require.True(t, task.DueAt.Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)), task.DueAt)

	code, out = b.do(t, http.MethodGet, "/v1/tasks?from=2026-12-01+17:59&to=2026-12-01+18:01", "")
	require.Equal(t, http.StatusOK, code, out)
	require.Len(t, out["tasks"], 1)

	code, out = b.do(t, http.MethodPost, "/v1/tasks", `{"key":"k2","rule":"enquiry_timeout","due_at":"next week"}`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, out["error"], "Asia/Shanghai")
}

// TestDeliveryByPrefix: GET /v1/deliveries/{id} takes the 12 characters
// `deliveries list` prints; a prefix two match is a 409 naming them.
func TestDeliveryByPrefix(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	key := engine.RunKey("daily", now0)
	b.apply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: "daily", Slot: now0, Now: now0})
	b.apply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{
		{ID: "6820f695ccfc11112222333344445555", Recipient: "a", Channel: "mock", NotBefore: now0, Deadline: now0.Add(time.Hour)},
		{ID: "6820f695aaaa11112222333344445555", Recipient: "b", Channel: "mock", NotBefore: now0, Deadline: now0.Add(time.Hour)},
	}})
	code, out := b.do(t, http.MethodGet, "/v1/deliveries/6820f695ccfc", "")
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, "6820f695ccfc11112222333344445555", out["id"])
	code, out = b.do(t, http.MethodGet, "/v1/deliveries/6820f695", "")
	require.Equal(t, http.StatusConflict, code, out)
	require.Len(t, out["matches"], 2)
	code, out = b.do(t, http.MethodGet, "/v1/deliveries/6820f6", "")
	require.Equal(t, http.StatusNotFound, code, out)
	require.Contains(t, out["error"], "at least 8 characters")
}

// TestTypedTimeAcrossDSTSaysWhy: a time typed without an offset that the
// display zone's clocks show twice is refused with both instants, in every
// field that reads one.
func TestTypedTimeAcrossDSTSaysWhy(t *testing.T) {
	t.Parallel()
	n := enginetest.New()
	b := &apiBundle{node: n, h: api.New(api.Config{Hosts: testHosts,
		FSM: n.FSM, Replicator: n, Rules: taskRules, NowFunc: func() time.Time { return now0 },
		StatusFunc: func() api.Status { return api.Status{} }, DisplayTimezone: "America/New_York",
	})}
	const twice = "happens twice in America/New_York; give its offset: 2026-11-01T01:30:00-04:00 or 2026-11-01T01:30:00-05:00"
	for _, tc := range []struct{ method, target, body, field string }{
		{http.MethodPost, "/v1/tasks", `{"key":"k","rule":"enquiry_timeout","due_at":"2026-11-01 01:30"}`, "due_at"},
		{http.MethodPost, "/v1/rules/daily/fire", `{"slot":"2026-11-01 01:30"}`, "slot"},
		{http.MethodPost, "/v1/deliveries/retry", `{"rule":"daily","state":"failed","since":"2026-11-01 01:30"}`, "since"},
		{http.MethodGet, "/v1/tasks?from=2026-11-01+01:30", "", "from"},
	} {
		code, out := b.do(t, tc.method, tc.target, tc.body)
		require.Equal(t, http.StatusBadRequest, code, out)
		require.Equal(t, tc.field, out["field"], out)
		require.Contains(t, out["error"], twice, tc.target)
	}
}
