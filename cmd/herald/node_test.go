package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/calendar"
)

// Three whole nodes in one process — the engine's state machine and leader
// loops, Raft, the Lua rules and the mock plugin — as `herald dev` runs them.
// Stopping the leader hands the work to another node, and no slot reaches a
// person twice.
func TestInProcessThreeNodes(t *testing.T) {
	c := setupE2E(t) // for its rules, outbox and the outbox reader
	log := newLogger("error")
	var nodes []*node
	stopped := map[*node]bool{}
	t.Cleanup(func() {
		for _, n := range nodes {
			if !stopped[n] {
				n.stop()
			}
		}
	})
	channels := map[string]map[string]any{"mock": {"plugin": "mock", "outbox": c.outbox}}
	for i, a := range c.nodes {
		cfg := nodeConfig{NodeID: a.id, DataDir: a.data, RaftAddr: a.raft, HTTPAddr: a.http,
			Rules: c.rules, Channels: channels, devTimeouts: true, raftLogLevel: "error"}
		if i == 0 {
			cfg.Bootstrap = true
		} else {
			cfg.Join = c.nodes[0].http
		}
		n, err := startNode(context.Background(), cfg, log.With("node", a.id))
		require.NoError(t, err)
		nodes = append(nodes, n)
	}
	leaderOf := func() *node {
		for _, n := range nodes {
			if !stopped[n] && n.raft.IsLeader() {
				return n
			}
		}
		return nil
	}
	eventually(t, 20*time.Second, "three members", func() bool {
		l := leaderOf()
		return l != nil && len(l.raft.Status().Members) == 3
	})
	eventually(t, 30*time.Second, "slots delivered", func() bool { return c.slotsDelivered() >= 2 })

	old := leaderOf()
	old.stop()
	stopped[old] = true
	eventually(t, 10*time.Second, "a new leader", func() bool { return leaderOf() != nil })
	before := c.slotsDelivered()
	eventually(t, 30*time.Second, "the new leader sends", func() bool { return c.slotsDelivered() >= before+2 })

	// Every node that is still up holds the same runs: the state is replicated.
	l := leaderOf()
	eventually(t, 10*time.Second, "followers caught up", func() bool {
		for _, n := range nodes {
			if !stopped[n] && n.fsm.AppliedIndex() < l.fsm.AppliedIndex() {
				return false
			}
		}
		return true
	})
	sent := func(n *node) int {
		return len(n.fsm.Deliveries(func(d *engine.Delivery) bool { return d.State == engine.StateSent }))
	}
	for _, n := range nodes {
		if !stopped[n] {
			require.GreaterOrEqual(t, sent(n), 4, "node %s", n.cfg.NodeID)
		}
	}
	got, raw := c.delivered()
	for who, slots := range got {
		for slot, k := range slots {
			require.Equal(t, 1, k, "%s got %s %d times", who, slot, k)
		}
	}
	t.Logf("%d slots to each of %d people, %d raw receipts", len(got["alice"]), len(got), raw)
}

func TestCalendarWarnings(t *testing.T) {
	t.Parallel()
	_, last := calendar.HolidayDataRange()
	uses := []engine.Rule{{Name: "daily", Calendar: calendar.CNWorkday}}
	require.Empty(t, calendarWarnings(uses, time.Date(last, 10, 1, 0, 0, 0, 0, time.UTC)))
	require.Len(t, calendarWarnings(uses, time.Date(last, 11, 15, 0, 0, 0, 0, time.UTC)), 1)
	require.Empty(t, calendarWarnings([]engine.Rule{{Name: "weekly", Calendar: "weekday"}}, time.Date(last+1, 1, 1, 0, 0, 0, 0, time.UTC)))
}
