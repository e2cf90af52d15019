package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	testpoll "github.com/heraldhq/herald/engine/enginetest/poll"
)

// Shutdown stops the leader work, and waits for it, before it stops Raft:
// leader work must never run on a node whose Raft is gone (its sends would
// outlive the leadership they were confirmed under).
func TestShutdownWaitsForLeaderWork(t *testing.T) {
	t.Parallel()
	tn := newTestNode(t, nodeOpts{id: "s", bootstrap: true})
	leaderOf(t, []*testNode{tn})

	started, cancelled, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	// One RunLeader per node: replace the harness's with ours.
	tn.stopLead()
	<-tn.leadDone
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		tn.node.RunLeader(context.Background(), func(ctx context.Context) {
			close(started)
			<-ctx.Done()
			close(cancelled)
			<-release // slow cleanup, e.g. a send winding down
		})
	}()
	waitClosed(t, started, "lead did not start")

	shutdownDone := make(chan struct{})
	go func() {
		defer close(shutdownDone)
		_ = tn.node.Shutdown()
	}()
	waitClosed(t, cancelled, "Shutdown did not cancel the leader work")
	require.Never(t, func() bool {
		select {
		case <-shutdownDone:
			return true
		default:
			return tn.node.raft.State() == raft.Shutdown
		}
	}, 300*time.Millisecond, 5*time.Millisecond, "Raft stopped while the leader work was still running")
	close(release)
	waitClosed(t, shutdownDone, "Shutdown did not return")
	waitClosed(t, runDone, "RunLeader did not return")
}

func waitClosed(t *testing.T, ch <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatal(msg)
	}
}

// Every raft error that means "this node cannot take the write" reads as
// engine.ErrNotLeader (callers retry elsewhere, the API answers 503), and
// still carries raft's error, which says whether the outcome is unknown.
func TestMapRaftErr(t *testing.T) {
	t.Parallel()
	for _, err := range []error{raft.ErrNotLeader, raft.ErrLeadershipLost, raft.ErrLeadershipTransferInProgress, raft.ErrRaftShutdown} {
		got := mapRaftErr(fmt.Errorf("add voter: %w", err))
		require.ErrorIs(t, got, engine.ErrNotLeader, err.Error())
		require.ErrorIs(t, got, err)
	}
	require.ErrorIs(t, mapRaftErr(raft.ErrRaftShutdown), ErrShutdown)
	require.NotErrorIs(t, mapRaftErr(raft.ErrEnqueueTimeout), engine.ErrNotLeader)
	require.ErrorIs(t, mapRaftErr(raft.ErrEnqueueTimeout), context.DeadlineExceeded, "a busy leader is a timeout, not a 500")
	require.NoError(t, mapRaftErr(nil))
}

// A flap (lost and regained, however fast) restarts the leader work: the
// old term's work is stopped, and has returned, before the new term's
// starts, never two at once on one node.
func TestLeadershipFlapRestartsLeaderWork(t *testing.T) {
	t.Parallel()
	events := make(chan leadEvent, 16)
	tn := newTestNode(t, nodeOpts{id: "f", bootstrap: true, events: events})
	requireEvent(t, events, leadEvent{node: "f", started: true})

	// As raft reports a step-down and a new election won in one burst.
	tn.node.leadership.notify <- false
	tn.node.leadership.notify <- true
	requireEvent(t, events, leadEvent{node: "f", started: false})
	requireEvent(t, events, leadEvent{node: "f", started: true})

	require.Empty(t, events)
}

// Leadership moved around a cluster: on each node the leader work
// alternates started/stopped (never two at once), and the work runs on the
// leader only.
func TestLeaderWorkFollowsTransfers(t *testing.T) {
	t.Parallel()
	events := make(chan leadEvent, 64)
	nodes := newCluster(t, 3, events, nil)
	running := map[string]bool{}
	take := func() leadEvent {
		t.Helper()
		select {
		case ev := <-events:
			require.NotEqual(t, running[ev.node], ev.started, "node %s: leader work %v twice in a row", ev.node, ev.started)
			running[ev.node] = ev.started
			return ev
		case <-time.After(waitTimeout):
			t.Fatal("no leader work event")
			return leadEvent{}
		}
	}
	for range 3 {
		leader := leaderOf(t, nodes)
		for !running[leader.id] {
			take()
		}
		// A transfer can time out on a loaded machine (its target did not
		// win within an election timeout, and raft keeps the leader): what
		// is tested is the work following leadership, so ask again until
		// leadership has moved, by the transfer or an election.
		testpoll.Until(t, waitTimeout, "leadership moves off "+leader.id, func() bool {
			return leader.node.raft.LeadershipTransfer().Error() == nil || !leader.node.IsLeader()
		})
		for running[leader.id] {
			take()
		}
	}
	// Events of different nodes arrive in any order: after a brief
	// leadership in between, its stop may come after the next start.
	// Settle until the work runs on the leader, and only there.
	for {
		next := leaderOf(t, nodes)
		only := running[next.id]
		for id, on := range running {
			only = only && on == (id == next.id)
		}
		if only {
			break
		}
		take()
	}
}

// withoutLeadWork runs its func with the leader work stopped (a restore
// replaces the state the loops derived theirs from) and starts the work
// again afterwards, from the new state.
func TestWithoutLeadWorkStopsAndRestartsIt(t *testing.T) {
	t.Parallel()
	events := make(chan leadEvent, 16)
	tn := newTestNode(t, nodeOpts{id: "f", bootstrap: true, events: events})
	requireEvent(t, events, leadEvent{node: "f", started: true})

	ran := false
	err := tn.node.withoutLeadWork(context.Background(), func() error {
		requireEvent(t, events, leadEvent{node: "f", started: false})
		ran = true
		return errors.New("the func's own error")
	})
	require.True(t, ran)
	require.EqualError(t, err, "the func's own error")
	requireEvent(t, events, leadEvent{node: "f", started: true})
	require.Empty(t, events)
}
