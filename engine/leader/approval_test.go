package leader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// Approval before a mass send (engine/approval.go), as the leader's loops
// carry it out: a run planned for more than approval.over people is held
// with its deliveries replicated and nothing sent, raises approval:RUN,
// and goes out once, after another token approves it.
func TestApprovalHoldsThenSendsOnce(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, start, engine.Rule{Name: "mass", Channel: "mock", ApprovalOver: 2, Deadline: 2 * time.Hour})
	s.rules.plan["mass"] = to("alice", "bob", "carol")
	s.lead("n1")
	c := engine.ManualRun(engine.Rule{Name: "mass", Timezone: "UTC"}, "UTC", start, "", start)
	c.Token = "ops-a"
	require.Nil(t, s.apply(engine.CmdStartRun, c))
	s.advance(start.Add(10*time.Minute), time.Second)

	run, ok := s.log.fsm.Run(c.Key)
	require.True(t, ok)
	require.Equal(t, engine.RunAwaitingApproval, run.State)
	require.Equal(t, "awaiting_approval", run.State.String())
	require.Equal(t, 3, run.Approval.Count)
	require.JSONEq(t, `{"msgtype":"text","content":"hi"}`, string(run.Approval.Preview))
	require.Len(t, s.log.fsm.RunDeliveries(c.Key), 3, "the plan is replicated")
	require.Empty(t, s.sender.all(), "nothing is sent while held")
	al, ok := s.log.fsm.Alert(engine.AlertID("approval:" + c.Key))
	require.True(t, ok, "approval:RUN is raised")
	require.Contains(t, al.Message, "planned for 3 people")
	require.Contains(t, al.Message, `"content":"hi"`)

	now := s.clock.Now()
	err, _ := s.apply(engine.CmdDecideRun, engine.DecideRun{RunKey: c.Key, Approve: true, By: "ops-a", Now: now}).(error)
	require.ErrorIs(t, err, engine.ErrSameToken, "the token that fired it cannot approve it")
	s.lead("n2") // a leader change while held changes nothing
	s.advance(now.Add(time.Minute), time.Second)
	require.Empty(t, s.sender.all())

	res := s.apply(engine.CmdDecideRun, engine.DecideRun{RunKey: c.Key, Approve: true, By: "ops-b", Now: s.clock.Now()}).(engine.DecideResult)
	require.Equal(t, 3, res.Released)
	require.Equal(t, engine.RunPlanned, res.Run.State)
	s.advance(s.clock.Now().Add(time.Minute), time.Second)
	require.Len(t, s.sender.all(), 3)
	requireEachSentOnce(t, s)
	al, _ = s.log.fsm.Alert(engine.AlertID("approval:" + c.Key))
	require.True(t, al.Acked, "decided: the alert is settled")
	err, _ = s.apply(engine.CmdDecideRun, engine.DecideRun{RunKey: c.Key, Approve: true, By: "ops-b", Now: s.clock.Now()}).(error)
	require.ErrorIs(t, err, engine.ErrNotAwaitingApproval, "approved once")
}

// A rejected run sends nothing: its deliveries are cancelled.
func TestApprovalRejectedSendsNever(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, start, engine.Rule{Name: "mass", Schedule: "0 2 * * *", Channel: "mock", ApprovalOver: 1})
	s.rules.plan["mass"] = to("alice", "bob")
	s.lead("n1")
	s.advance(start.Add(65*time.Minute), time.Second)
	runs := s.runs("mass")
	require.Len(t, runs, 1)
	require.Equal(t, engine.RunAwaitingApproval, runs[0].State)
	res := s.apply(engine.CmdDecideRun, engine.DecideRun{RunKey: runs[0].Key, By: "loopback", Now: s.clock.Now()}).(engine.DecideResult)
	require.Equal(t, 2, res.Cancelled)
	require.Equal(t, engine.RunRejected, res.Run.State)
	s.advance(s.clock.Now().Add(3*time.Hour), time.Second)
	require.Empty(t, s.sender.all())
	for _, d := range s.log.fsm.RunDeliveries(runs[0].Key) {
		require.Equal(t, engine.StateCancelled, d.State)
	}
}

// The wait counts against the deadline: not approved in time, the
// deliveries expire with the usual alert, and a late approval sends none.
func TestApprovalWaitExpiresAtDeadline(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, start, engine.Rule{Name: "mass", Schedule: "0 2 * * *", Channel: "mock", ApprovalOver: 1, Deadline: 30 * time.Minute})
	s.rules.plan["mass"] = to("alice", "bob")
	s.lead("n1")
	s.advance(start.Add(2*time.Hour), time.Second)
	runs := s.runs("mass")
	require.Len(t, runs, 1)
	for _, d := range s.log.fsm.RunDeliveries(runs[0].Key) {
		require.Equal(t, engine.StateExpired, d.State)
	}
	_, ok := s.log.fsm.Alert(engine.AlertID("expired:" + runs[0].Key))
	require.True(t, ok, "expired:RUN is raised")
	res := s.apply(engine.CmdDecideRun, engine.DecideRun{RunKey: runs[0].Key, Approve: true, By: "x", Now: s.clock.Now()}).(engine.DecideResult)
	require.Equal(t, 2, res.Expired)
	require.Zero(t, res.Released)
	s.advance(s.clock.Now().Add(time.Hour), time.Second)
	require.Empty(t, s.sender.all())
}

// A run at or under the threshold is not held.
func TestApprovalUnderThresholdGoesAtOnce(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, start, engine.Rule{Name: "small", Schedule: "0 2 * * *", Channel: "mock", ApprovalOver: 2})
	s.rules.plan["small"] = to("alice", "bob")
	s.lead("n1")
	s.advance(start.Add(65*time.Minute), time.Second)
	require.Len(t, s.sender.all(), 2)
	require.Nil(t, s.runs("small")[0].Approval)
}
