package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// TestPauseAcrossLeaderStop: three whole nodes in one process, a rule
// firing every second. It is paused through the CLI; the leader is stopped
// while it is paused; it is resumed through another node. Nothing reaches
// the outbox while it is paused, its slots are recorded as paused on the
// new leader too, and after the resume nothing is doubled.
func TestPauseAcrossLeaderStop(t *testing.T) {
	c := startInProcess(t)

	pausedRuns := func(n *node) int {
		return len(n.fsm.Runs(func(r *engine.Run) bool { return r.Rule == "tick" && r.State == engine.RunPaused }))
	}
	old := c.leader()
	out, err := runHerald(t, "rules", "pause", "tick", "--reason", "test", "--addr", old.cfg.HTTPAddr)
	require.NoError(t, err, out)
	// Let what was claimed before the pause settle: three slots recorded
	// paused later, the outbox must not grow any more.
	eventually(t, 20*time.Second, "slots recorded paused", func() bool { return pausedRuns(old) >= 3 })
	_, before := c.delivered()

	c.stop(old)
	eventually(t, 15*time.Second, "a new leader", func() bool { return c.leader() != nil })
	l := c.leader()
	_, ok := l.fsm.Paused("tick")
	require.True(t, ok, "the pause is replicated")
	seen := pausedRuns(l)
	eventually(t, 20*time.Second, "the new leader records paused slots", func() bool { return pausedRuns(l) >= seen+3 })
	_, during := c.delivered()
	require.Equal(t, before, during, "nothing is sent while the rule is paused, across the leader change")
	st := l.status()
	for _, r := range st.Rules {
		if r.Name == "tick" {
			require.True(t, r.Paused)
			require.Equal(t, "test", r.Reason)
		}
	}

	var other *node
	for _, n := range c.running() {
		if n != l {
			other = n
		}
	}
	out, err = runHerald(t, "rules", "resume", "tick", "--addr", other.cfg.HTTPAddr) // a follower: forwarded
	require.NoError(t, err, out)
	resumed := c.slotsDelivered()
	eventually(t, 30*time.Second, "sends again after the resume", func() bool { return c.slotsDelivered() >= resumed+2 })

	c.requireEachSlotOnce()
	for _, r := range l.fsm.Runs(func(r *engine.Run) bool { return r.State == engine.RunPaused }) {
		require.Empty(t, l.fsm.RunDeliveries(r.Key), "a paused slot sends nothing")
	}
	require.Empty(t, l.fsm.Deliveries(func(d *engine.Delivery) bool {
		return d.State == engine.StatePending && d.Deadline.Before(time.Now())
	}), "nothing is left held")
}
