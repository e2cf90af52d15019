package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
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
	require.NoError(t, mapRaftErr(nil))
}
