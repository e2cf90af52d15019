package leader

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// A leader prunes soon after it is elected, not an hour into its term, so
// a cluster whose leader moves every hour still prunes.
func TestNewLeaderPrunesSoon(t *testing.T) {
	t.Parallel()
	s := newSim(t, t0)
	s.cfg.Retention = 7 * 24 * time.Hour
	s.apply(engine.CmdSubmitTask, engine.SubmitTask{Key: "old", Rule: "r", DueAt: t0, Now: t0})
	s.apply(engine.CmdCancelTask, engine.CancelTask{Key: "old", Now: t0})
	later := t0.Add(8 * 24 * time.Hour)
	for term := range 3 { // three elections, each under an hour apart
		s.clock.Set(later.Add(time.Duration(term) * 50 * time.Minute))
		s.lead("n1")
		s.step()
		s.advance(s.clock.Now().Add(pruneAfterElection), time.Minute)
		if _, ok := s.log.fsm.Task("old"); !ok {
			return
		}
	}
	t.Fatal("the cancelled task was never pruned")
}

func auditAt(at time.Time, actor, action, target string) engine.RecordAudit {
	return engine.RecordAudit{At: at, Actor: actor, Role: "operate", Remote: "192.0.2.7", Via: "", Action: action, Target: target, Status: 201, Node: "n1"}
}

// The leader prunes the trail with the rest, at its cut-off: records past
// the audit retention (90 days by default) go, younger ones stay.
func TestLeaderPrunesAudit(t *testing.T) {
	t.Parallel()
	later := t0.Add(200 * 24 * time.Hour)
	s := newSim(t, later)
	s.apply(engine.CmdRecordAudit, auditAt(later.Add(-91*24*time.Hour), "ci", "task.submit", "old"))
	s.apply(engine.CmdRecordAudit, auditAt(later.Add(-89*24*time.Hour), "ci", "task.submit", "young"))
	s.lead("n1")
	s.step()
	s.advance(later.Add(pruneAfterElection), time.Minute)
	recs := s.log.fsm.Audit(engine.AuditQuery{Limit: 10}).Records
	require.Len(t, recs, 1, "the record past 90 days is pruned, the other kept")
	require.Equal(t, "young", recs[0].Target)
}

// An acknowledged alert is pruned after retention; when its cause comes
// back, the new alert counts its notifications from 1 again, while the key
// of the first notification's task is still taken (by the task itself, or
// by the ledger once its run is pruned). It must still be delivered, and
// no loop may spin on the taken key.
func TestAlertRaisedAgainAfterPruneIsDelivered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// prune is the retention horizon, after the first notification
		// was delivered at start + a few seconds.
		prune func(start time.Time) time.Time
	}{
		{"task pruned too (its key in the ledger)", func(start time.Time) time.Time { return start.Add(time.Hour) }},
		{"task kept (it ended after the alert's last raise)", func(start time.Time) time.Time { return start.Add(time.Millisecond) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
			s := newSim(t, start, engine.Rule{Name: "ops_alert", Channel: "wecom_ops", Priority: heraldtype.PriorityHigh})
			s.rules.plan["ops_alert"] = func(run engine.RunContext) []engine.Planned {
				return []engine.Planned{{Recipient: "oncall", Payload: run.Data}}
			}
			s.lead("n1")
			s.apply(engine.CmdRaiseAlert, engine.RaiseAlert{Cause: "stuck:wecom", Message: "stuck", Now: start})
			s.advance(start.Add(time.Minute), time.Second)
			require.Len(t, s.sender.sentTo("oncall"), 1)
			id := engine.AlertID("stuck:wecom")
			require.Nil(t, s.apply(engine.CmdAckAlert, engine.AckAlert{ID: id}))

			later := start.Add(8 * 24 * time.Hour)
			s.clock.Set(later)
			res := s.apply(engine.CmdPrune, engine.Prune{Before: tc.prune(start), LedgerBefore: later.Add(-90 * 24 * time.Hour), Now: later}).(engine.PruneResult)
			require.Equal(t, 1, res.Alerts)
			_, ok := s.log.fsm.Alert(id)
			require.False(t, ok, "the acknowledged alert is pruned")

			s.apply(engine.CmdRaiseAlert, engine.RaiseAlert{Cause: "stuck:wecom", Message: "stuck again", Now: later})
			s.advance(later.Add(time.Minute), time.Second)
			// Nothing left due that the loops would spin on.
			now := s.clock.Now()
			require.True(t, s.sched.runOnce(s.ctx).After(now), "the scheduler would spin")
			before := s.log.fsm.AppliedIndex()
			s.house.runOnce(s.ctx)
			require.Equal(t, before, s.log.fsm.AppliedIndex(), "the housekeeper proposes again and again")

			require.Len(t, s.sender.sentTo("oncall"), 2, "the alert raised again is delivered")
			al, _ := s.log.fsm.Alert(id)
			require.Positive(t, al.Notified)
		})
	}
}

// TestDeliberateFireIsNotLate: a slot fired by hand hours after it passed
// and a task due in 2020 are not "still planning" the moment they start;
// planning is timed from when the run started.
func TestDeliberateFireIsNotLate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := newSim(t, now, engine.Rule{Name: "r", Schedule: "0 9 * * *", Channel: "mock"})
	s.lead("n1")
	backfill := engine.RunKey("r", now.Add(-3*time.Hour))
	s.apply(engine.CmdStartRun, engine.StartRun{Key: backfill, Rule: "r", Slot: now.Add(-3 * time.Hour), Manual: true, Now: now})
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	s.apply(engine.CmdSubmitTask, engine.SubmitTask{Key: "old", Rule: "r", DueAt: old, Now: now})
	s.apply(engine.CmdStartRun, engine.StartRun{Key: engine.TaskRunKey("old"), Rule: "r", Slot: old, TaskKey: "old", Now: now})

	wake := s.house.reportLateRuns(s.ctx, now)
	require.Empty(t, alertsWith(s.log.fsm, "late-run:"), "nothing is late the moment it starts")
	require.Equal(t, now.Add(LatePlanDefault), wake)

	// Still planning five minutes later: that is late, and said so in
	// terms of the run's own start.
	s.house.reportLateRuns(s.ctx, now.Add(LatePlanDefault+time.Second))
	late := alertsWith(s.log.fsm, "late-run:")
	require.Len(t, late, 2)
	for _, a := range late {
		require.Contains(t, a.Message, "still planning 5m1s after it started")
	}
}

// cancellingRules' on_failed is cut short by the end of leadership.
type cancellingRules struct {
	*simRules
	cancel context.CancelFunc
}

func (r *cancellingRules) OnFailed(ctx context.Context, _ string, _ engine.RunContext, _ engine.FailedDelivery, _ engine.SubmitFunc) error {
	r.cancel()
	<-ctx.Done()
	return ctx.Err()
}

// on_failed runs at least once: a hook cut short because leadership ended
// is not recorded as run, whatever the replicator does with a proposal made
// as the context ends.
func TestOnFailedCutShortIsNotRecordedAsRun(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := newSim(t, start)
	_, id := s.oneDelivery(start)
	c := s.apply(engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{id}, Leader: "n1", Now: start, Timeout: time.Minute}).(engine.ClaimResult)
	s.apply(engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: start, Results: []engine.Settlement{{ID: id, Seq: c.Claimed[0].Seq, Status: heraldtype.StatusPermanent}}})
	require.Len(t, s.log.fsm.ToCompensate(10), 1)

	ctx, cancel := context.WithCancel(s.ctx)
	s.cfg.Rules = &cancellingRules{simRules: s.rules, cancel: cancel}
	s.lead("n1")
	s.house.compensate(ctx)
	require.Len(t, s.log.fsm.ToCompensate(10), 1, "on_failed was cut short, yet recorded as run")
}

// TestReconfigureChangesTheNextPrune: a config reload's audit_retention
// is the next prune's, with no new term (the node's SIGHUP).
func TestReconfigureChangesTheNextPrune(t *testing.T) {
	t.Parallel()
	later := t0.Add(200 * 24 * time.Hour)
	s := newSim(t, later)
	s.apply(engine.CmdRecordAudit, auditAt(later.Add(-89*24*time.Hour), "ci", "task.submit", "young"))
	s.apply(engine.CmdRecordAudit, auditAt(later.Add(-10*24*time.Hour), "ci", "task.submit", "recent"))
	s.lead("n1")
	s.l.Reconfigure(Reloadable{Retention: s.cfg.Retention, AuditRetention: 30 * 24 * time.Hour})
	s.step()
	s.advance(later.Add(pruneAfterElection), time.Minute)
	recs := s.log.fsm.Audit(engine.AuditQuery{Limit: 10}).Records
	require.Len(t, recs, 1, "the record past the reloaded 30 days is pruned")
	require.Equal(t, "recent", recs[0].Target)
}
