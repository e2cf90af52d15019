package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/heraldtype"
)

func TestPauseResumeAPI(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	code, out := b.do(t, http.MethodPost, "/v1/rules/daily/pause", `{"reason":"national holiday","by":"lina@ops"}`)
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, true, out["paused"])
	require.Equal(t, "loopback", out["paused_by"], "who the node verified, not the body's by")
	require.Equal(t, "lina@ops", out["note"], "an older client's by is kept as the note")
	require.Equal(t, "national holiday", out["reason"])
	p, ok := b.node.FSM.Paused("daily")
	require.True(t, ok)
	require.True(t, p.At.Equal(now0))

	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/pause", "")
	require.Equal(t, http.StatusConflict, code, out)
	require.Contains(t, out["error"], "already paused")
	code, _ = b.do(t, http.MethodPost, "/v1/rules/nope/pause", "")
	require.Equal(t, http.StatusNotFound, code)

	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/resume", "")
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, false, out["paused"])
	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/resume", "")
	require.Equal(t, http.StatusConflict, code, out)
	require.Contains(t, out["error"], "not paused")
}

func TestRetryAPI(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	key := engine.RunKey("daily", now0.Add(-time.Hour))
	b.apply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: "daily", Slot: now0.Add(-time.Hour), Now: now0.Add(-time.Hour)})
	ids := map[string]string{"a": "aaaaaaaa00000000", "b": "bbbbbbbb00000000", "c": "cccccccc00000000"}
	var nds []engine.NewDelivery
	for who, id := range ids {
		nds = append(nds, engine.NewDelivery{ID: id, Recipient: who, Channel: "mock", NotBefore: now0.Add(-time.Hour), Deadline: now0.Add(-time.Minute)})
	}
	b.apply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: nds})
	b.apply(t, engine.CmdExpire, engine.Expire{IDs: []string{ids["a"], ids["b"]}, Now: now0})
	claim := b.apply(t, engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{ids["c"]}, Leader: "n1", Now: now0.Add(-30 * time.Minute), Timeout: time.Minute}).(engine.ClaimResult)
	b.apply(t, engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: now0.Add(-30 * time.Minute),
		Results: []engine.Settlement{{ID: ids["c"], Seq: claim.Claimed[0].Seq, Status: heraldtype.StatusSent}}})

	// One, by an 8-character prefix.
	code, out := b.do(t, http.MethodPost, "/v1/deliveries/aaaaaaaa/retry", `{"deadline":"30m","by":"ops"}`)
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, []any{ids["a"]}, out["retried"])
	d, _ := b.node.FSM.Delivery(ids["a"])
	require.Equal(t, engine.StatePending, d.State)
	require.True(t, d.Deadline.Equal(now0.Add(30*time.Minute)))
	require.Equal(t, "loopback", d.RetriedBy)
	require.Equal(t, "ops", d.RetryNote)

	// A sent one is never retried.
	code, out = b.do(t, http.MethodPost, "/v1/deliveries/"+ids["c"]+"/retry", "")
	require.Equal(t, http.StatusConflict, code, out)
	require.Contains(t, out["error"], "already sent")

	// By rule and state: the other expired one.
	code, out = b.do(t, http.MethodPost, "/v1/deliveries/retry", `{"rule":"daily","state":"expired","since":"2026-12-01T00:00:00Z"}`)
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, []any{ids["b"]}, out["retried"])
	code, out = b.do(t, http.MethodPost, "/v1/deliveries/retry", `{"rule":"daily"}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Equal(t, "state", out["field"])
	code, out = b.do(t, http.MethodPost, "/v1/deliveries/retry", `{"run":"`+key+`","deadline":"soon"}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Equal(t, "deadline", out["field"])
}

// TestFireBackfillsSkippedSlot: /fire of a slot that was skipped fires it
// after all, once; the second fire is a 409.
func TestFireBackfillsSkippedSlot(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	slot := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	key := engine.RunKey("daily", slot)
	b.apply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: "daily", Slot: slot, Skip: true, Now: slot.Add(3 * time.Hour)})
	code, out := b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{"slot":"2026-11-30T09:00:00+08:00"}`)
	require.Equal(t, http.StatusCreated, code, out)
	require.Equal(t, "skipped", out["backfilled"])
	run, _ := b.node.FSM.Run(key)
	require.Equal(t, engine.RunPlanning, run.State)
	require.True(t, run.Manual)
	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{"slot":"2026-11-30T09:00:00+08:00"}`)
	require.Equal(t, http.StatusConflict, code, out)
	require.Contains(t, out["error"], "already fired")
}

// TestRunThatPlannedNobody: a task whose data matched no one is done, and
// runs and stats say that nobody was planned.
func TestRunThatPlannedNobody(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	b.apply(t, engine.CmdSubmitTask, engine.SubmitTask{Key: "k", Rule: "enquiry_timeout", DueAt: now0, Now: now0})
	key := engine.TaskRunKey("k")
	b.apply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: "enquiry_timeout", Slot: now0, TaskKey: "k", Date: "2026-12-01", Now: now0})
	b.apply(t, engine.CmdFinishPlan, engine.FinishPlan{RunKey: key, Now: now0})
	code, out := b.do(t, http.MethodGet, "/v1/runs", "")
	require.Equal(t, http.StatusOK, code)
	run := out["runs"].([]any)[0].(map[string]any)
	require.Equal(t, true, run["planned_nobody"])
	code, out = b.do(t, http.MethodGet, "/v1/stats?date=2026-12-01", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, 1.0, out["total"].(map[string]any)["planned_nobody_runs"])
}

// TestFireOfPausedRuleSaysItWaits: a fire by hand of a paused rule plans
// its run, but its messages wait for the resume; the answer says so, so an
// operator does not take "fired" for "sent".
func TestFireOfPausedRuleSaysItWaits(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	code, out := b.do(t, http.MethodPost, "/v1/rules/daily/pause", `{"reason":"holiday"}`)
	require.Equal(t, http.StatusOK, code, out)
	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/fire", `{"slot":"2026-12-01T09:00:00+08:00"}`)
	require.Equal(t, http.StatusCreated, code, out)
	require.Equal(t, true, out["paused"], out)

	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/resume", "")
	require.Equal(t, http.StatusOK, code, out)
	code, out = b.do(t, http.MethodPost, "/v1/rules/daily/fire", "")
	require.Equal(t, http.StatusCreated, code, out)
	require.NotContains(t, out, "paused")
}

// TestRetryOfUnknownRunOrRuleIs400: a run key or rule that names nothing
// (a typo, a key with its slot rewritten) is refused, not answered "0
// retried", which reads as "nothing failed".
func TestRetryOfUnknownRunOrRuleIs400(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	code, out := b.do(t, http.MethodPost, "/v1/deliveries/retry", `{"run":"daily@2026-11-30 09:00:00 +08:00"}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Equal(t, "run", out["field"], out)
	code, out = b.do(t, http.MethodPost, "/v1/deliveries/retry", `{"rule":"daily_reprot","state":"failed"}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Equal(t, "rule", out["field"], out)
	// A loaded rule with nothing failed is not an error: nothing to retry.
	code, out = b.do(t, http.MethodPost, "/v1/deliveries/retry", `{"rule":"daily","state":"failed"}`)
	require.Equal(t, http.StatusOK, code, out)
	require.Empty(t, out["retried"])
}

// Issue 19: paused_by, retried_by and confirmed_by were whatever the body
// said, and /v1/status and the console showed them as fact. They are the
// verified caller now — the token's name — and what the body says is a
// note beside it. On the code before, paused_by was "root" here.
func TestAttributionIsTheToken(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, testTokens)
	const remote = "203.0.113.9:5000"
	rec := b.call(http.MethodPost, "/v1/rules/daily/pause", `{"reason":"holiday","by":"root"}`, remote, operateSecret)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var pv api.PauseView
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &pv))
	require.Equal(t, "ops", pv.PausedBy, "the token's name, whatever the body claims")
	require.Equal(t, "root", pv.Note)
	p, _ := b.node.FSM.Paused("daily")
	require.Equal(t, "ops", p.By)
	require.Equal(t, "root", p.Note)

	rec = b.call(http.MethodPost, "/v1/rules/daily/resume", `{"note":"back"}`, remote, operateSecret)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	rec = b.call(http.MethodPost, "/v1/rules/daily/pause", `{"note":"alice@laptop","by":"mallory"}`, remote, adminSecret)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	p, _ = b.node.FSM.Paused("daily")
	require.Equal(t, "root", p.By)
	require.Equal(t, "alice@laptop", p.Note, "note wins over by")
}

// While a member applies FSM version 3 the note is left out: the command
// stays a body that member reads, and who paused is still recorded.
func TestNoteLeftOutWhileAMemberIsBehind(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, testTokens)
	b.node.MustApply(t, engine.CmdUpsertMember, engine.Member{ID: "n9", FSMVersion: 3})
	rec := b.call(http.MethodPost, "/v1/rules/daily/pause", `{"by":"root"}`, "203.0.113.9:5000", operateSecret)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	p, _ := b.node.FSM.Paused("daily")
	require.Equal(t, "ops", p.By)
	require.Empty(t, p.Note)
}
