package leader

import (
	"testing"
	"time"

	"github.com/heraldhq/herald/engine"
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
