package leader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// With PlanAhead, a slot's run is started and planned before the slot, its
// deliveries are not due before the slot, and the first leaves at the slot.
func TestPlanAheadPlansBeforeTheSlotAndSendsAtIt(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, slot.Add(-5*time.Minute), engine.Rule{Name: "daily", Schedule: "0 9 * * *", Timezone: "Asia/Shanghai", Channel: "mock"})
	s.cfg.PlanAhead = time.Minute
	s.rules.plan["daily"] = to("alice", "bob")
	s.lead("n1")

	s.advance(slot.Add(-time.Minute-time.Millisecond), time.Millisecond)
	require.Empty(t, s.runs("daily"), "not started more than PlanAhead early")
	s.advance(slot.Add(-time.Minute), time.Millisecond)
	runs := s.runs("daily")
	require.Len(t, runs, 1)
	require.Equal(t, engine.RunPlanned, runs[0].State, "planned before the slot")
	require.True(t, slot.Equal(runs[0].Slot))
	require.False(t, runs[0].Late)
	require.Len(t, s.log.fsm.RunDeliveries(runs[0].Key), 2)

	s.advance(slot.Add(-time.Millisecond), time.Millisecond)
	require.Empty(t, s.sender.all(), "nothing leaves before the slot")
	s.advance(slot, time.Millisecond)
	sent := s.sender.all()
	require.Len(t, sent, 2)
	for _, x := range sent {
		require.True(t, slot.Equal(x.at), "sent at %s, not at the slot", x.at)
	}
	// Now that the rule is known to plan fast, its next slot is started
	// only a little over planLeadMin before it: a rule edited in the last
	// minute still applies to it.
	require.Len(t, s.runs("daily"), 1)
	s.advance(slot.Add(24*time.Hour-2*time.Second), time.Second)
	require.Len(t, s.runs("daily"), 1)
	s.advance(slot.Add(24*time.Hour), time.Millisecond)
	require.Len(t, s.runs("daily"), 2)
}

// PlanAhead is capped: a run is never started more than MaxPlanAhead early.
func TestPlanAheadIsCapped(t *testing.T) {
	t.Parallel()
	s := newSim(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	s.cfg.PlanAhead = 24 * time.Hour
	s.lead("n1")
	require.Equal(t, MaxPlanAhead, s.l.cfg.PlanAhead)
	s.cfg.PlanAhead = -time.Second
	s.lead("n2")
	require.Zero(t, s.l.cfg.PlanAhead)
}
