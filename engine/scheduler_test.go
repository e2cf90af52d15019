package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A due task whose StartRun the state machine refuses stays pending: the
// scheduler must not wake for it at once, again and again.
func TestSchedulerDoesNotSpinOnARefusedTask(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	s := newSim(t, start, Rule{Name: "r", Channel: "mock"})
	s.rules.plan["r"] = to("alice")
	s.lead("n1")
	require.True(t, s.apply(CmdSubmitTask, SubmitTask{Key: "k", Rule: "r", DueAt: start, Now: start}).(SubmitResult).Created)
	// Its run key taken by a run that is not the task's (a log written
	// before tasks had records): the task can never fire.
	require.Nil(t, s.apply(CmdStartRun, StartRun{Key: TaskRunKey("k"), Rule: "r", Slot: start, Now: start}))
	wake := s.sched.runOnce(s.ctx)
	s.sched.wg.Wait()
	require.True(t, wake.After(start), "next look at %s: the scheduler would spin", wake)
}

// A task key whose run exists is refused at submit, like one in the ledger.
func TestSubmitRefusesATaskKeyWhoseRunExists(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	require.Nil(t, b.apply(CmdStartRun, StartRun{Key: TaskRunKey("k"), Rule: "r", Slot: t0, Now: t0}))
	err, _ := b.apply(CmdSubmitTask, SubmitTask{Key: "k", Rule: "r", DueAt: t0, Now: t0}).(error)
	require.ErrorIs(t, err, ErrTaskKeyUsed)
}

// The scheduler reads the runs still planning, then starts a planner for
// each that has none. A planner that finishes in between leaves the run
// planned, and the stale entry must not plan it again: the rule would run
// twice and a changed recipient list would add to a finished plan.
func TestStalePlanningRunIsNotPlannedAgain(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := newSim(t, start.Add(-time.Minute), Rule{Name: "r", Schedule: "0 9 * * *", Channel: "mock"})
	calls := 0
	s.rules.plan["r"] = func(run RunContext) []Planned {
		calls++
		if calls == 1 {
			return to("alice")(run)
		}
		return to("alice", "carol")(run)
	}
	s.lead("n1")
	s.sched.runOnce(s.ctx)
	s.clock.Set(start)
	s.sched.runOnce(s.ctx)
	key := RunKey("r", start)
	stale, ok := s.log.fsm.Run(key)
	require.True(t, ok)
	s.sched.wg.Wait()
	r, _ := s.log.fsm.Run(key)
	require.Equal(t, RunPlanned, r.State)
	require.Equal(t, RunPlanning, stale.State)

	s.sched.startPlanning(s.ctx, stale)
	s.sched.wg.Wait()
	require.Equal(t, 1, calls, "the rule ran again for a planned run")
	require.Len(t, s.log.fsm.RunDeliveries(key), 1)
}
