package leader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

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
