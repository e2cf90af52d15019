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
