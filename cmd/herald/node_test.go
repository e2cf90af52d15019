package main

import (
	"context"
	"maps"
	"net"
	"path/filepath"
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
	c := startInProcess(t)

	c.stop(c.leader())
	eventually(t, 10*time.Second, "a new leader", func() bool { return c.leader() != nil })
	before := c.slotsDelivered()
	eventually(t, 30*time.Second, "the new leader sends", func() bool { return c.slotsDelivered() >= before+2 })

	// Every node that is still up holds the same runs: the state is replicated.
	l := c.leader()
	eventually(t, 10*time.Second, "followers caught up", func() bool {
		for _, n := range c.running() {
			if n.fsm.AppliedIndex() < l.fsm.AppliedIndex() {
				return false
			}
		}
		return true
	})
	sent := func(n *node) int {
		return len(n.fsm.Deliveries(func(d *engine.Delivery) bool { return d.State == engine.StateSent }))
	}
	for _, n := range c.running() {
		require.GreaterOrEqual(t, sent(n), 4, "node %s", n.cfg.NodeID)
	}
	got, raw := c.requireEachSlotOnce()
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

// A node listening on every interface (http_addr 0.0.0.0:PORT) records the
// address the others can dial: its Raft host with its HTTP port. It
// recorded 0.0.0.0:PORT, which each member dialled as its own machine: a
// follower forwarded writes to itself (503), and the leader read its own
// status for the member's build.
func TestWildcardHTTPAddrAdvertisesTheRaftHost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := func(id string, bootstrap bool, join string) (*node, string) {
		httpAddr := freeAddr(t)
		_, port, err := net.SplitHostPort(httpAddr)
		require.NoError(t, err)
		raftAddr := freeAddr(t)
		cfg := nodeConfig{NodeID: id, DataDir: filepath.Join(dir, id), RaftAddr: raftAddr, HTTPAddr: "0.0.0.0:" + port,
			Bootstrap: bootstrap, Join: join, Rules: filepath.Join(dir, "rules"), devTimeouts: true, raftLogLevel: "error"}
		n, err := startNode(context.Background(), cfg, newLogger("error"))
		require.NoError(t, err)
		t.Cleanup(n.stop)
		return n, "127.0.0.1:" + port
	}
	_, http1 := start("n1", true, "")
	n2, http2 := start("n2", false, http1)
	want := map[string]string{"n1": http1, "n2": http2}
	eventually(t, 30*time.Second, "both records carry a dialable address", func() bool {
		got := map[string]string{}
		for _, m := range n2.fsm.Members() {
			got[m.ID] = m.HTTPAddr
		}
		return maps.Equal(got, want)
	})
	require.Equal(t, http1, n2.raft.LeaderHTTPAddr())
}
