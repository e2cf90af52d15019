package leader

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// A due task whose StartRun the state machine refuses stays pending: the
// scheduler must not wake for it at once, again and again.
func TestSchedulerDoesNotSpinOnARefusedTask(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	s := newSim(t, start, engine.Rule{Name: "r", Channel: "mock"})
	s.rules.plan["r"] = to("alice")
	s.lead("n1")
	require.True(t, s.apply(engine.CmdSubmitTask, engine.SubmitTask{Key: "k", Rule: "r", DueAt: start, Now: start}).(engine.SubmitResult).Created)
	// Its run key taken by a run that is not the task's (a log written
	// before tasks had records): the task can never fire.
	require.Nil(t, s.apply(engine.CmdStartRun, engine.StartRun{Key: engine.TaskRunKey("k"), Rule: "r", Slot: start, Now: start}))
	wake := s.sched.runOnce(s.ctx)
	s.l.planner.wg.Wait()
	require.True(t, wake.After(start), "next look at %s: the scheduler would spin", wake)
}

// The scheduler reads the runs still planning, then starts a planner for
// each that has none. A planner that finishes in between leaves the run
// planned, and the stale entry must not plan it again: the rule would run
// twice and a changed recipient list would add to a finished plan.
func TestStalePlanningRunIsNotPlannedAgain(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := newSim(t, start.Add(-time.Minute), engine.Rule{Name: "r", Schedule: "0 9 * * *", Channel: "mock"})
	calls := 0
	// The first plan waits until the test has read the run: without that,
	// the planner may finish before the read and the "stale" record would
	// already be planned (what a loaded machine did).
	read := make(chan struct{})
	s.rules.plan["r"] = func(run engine.RunContext) []engine.Planned {
		calls++
		if calls == 1 {
			<-read
			return to("alice")(run)
		}
		return to("alice", "carol")(run)
	}
	s.lead("n1")
	s.sched.runOnce(s.ctx)
	s.clock.Set(start)
	s.sched.runOnce(s.ctx)
	key := engine.RunKey("r", start)
	stale, ok := s.log.fsm.Run(key)
	require.True(t, ok)
	close(read)
	s.l.planner.wg.Wait()
	r, _ := s.log.fsm.Run(key)
	require.Equal(t, engine.RunPlanned, r.State)
	require.Equal(t, engine.RunPlanning, stale.State)

	s.l.planner.startPlanning(s.ctx, stale)
	s.l.planner.wg.Wait()
	require.Equal(t, 1, calls, "the rule ran again for a planned run")
	require.Len(t, s.log.fsm.RunDeliveries(key), 1)
}

// A slot fired by hand long after it passed (a backfill) is sent: its
// deadline counts from when it was fired, not from its slot, which would
// expire every delivery at once.
func TestBackfilledSlotIsSentNotExpired(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	now := slot.Add(25 * time.Hour)
	s := newSim(t, now, engine.Rule{Name: "daily", Schedule: "0 9 * * *", Channel: "mock", Stagger: engine.Stagger{Jitter: time.Minute}})
	s.rules.plan["daily"] = to("alice", "bob")
	s.lead("n1")
	require.Nil(t, s.apply(engine.CmdStartRun, engine.StartRun{Key: engine.RunKey("daily", slot), Rule: "daily", Slot: slot, Manual: true, Now: now}))
	s.advance(now.Add(2*time.Minute), time.Second)
	for _, d := range s.log.fsm.RunDeliveries(engine.RunKey("daily", slot)) {
		require.Equal(t, engine.StateSent, d.State, "%s: %s", d.Recipient, d.LastError)
		require.Equal(t, now.Add(engine.DefaultDeadline), d.Deadline)
		require.False(t, d.NotBefore.Before(now), "the stagger counts from the fire too")
	}
	require.Empty(t, alertsWith(s.log.fsm, "expired:"))
}

// onceAt is a schedule with a single slot.
type onceAt struct{ at time.Time }

func (o onceAt) Next(after time.Time) (time.Time, bool) {
	if after.Before(o.at) {
		return o.at, true
	}
	return time.Time{}, false
}

// A plan whose replication failed is tried again soon, not when something
// else happens to wake the scheduler (in a quiet cluster, its one-minute
// cap).
func TestFailedPlanIsRetriedSoon(t *testing.T) {
	t.Parallel()
	b := setupLeader(t)
	flaky := &flakyLog{localLog: b.log, fail: map[engine.CommandType]int{engine.CmdAddDeliveries: 1}}
	slot := time.Now().Add(50 * time.Millisecond)
	b.leader.cfg.Replicator = flaky
	b.leader.cfg.ScheduleFunc = func(engine.Rule) (engine.Schedule, error) { return onceAt{slot}, nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.leader.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	key := engine.RunKey("tick", slot)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if r, ok := b.log.fsm.Run(key); ok && r.State == engine.RunPlanned {
			break
		}
		require.True(t, time.Now().Before(deadline), "the run is still not planned")
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}
	require.Len(t, b.log.fsm.RunDeliveries(key), 2)
}
