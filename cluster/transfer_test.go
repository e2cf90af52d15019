package cluster

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Shutdown on the leader hands leadership over first: a follower leads
// before the old leader's Raft stops, so a planned restart costs no
// election gap (without it the followers wait out their election timeout).
func TestShutdownOnTheLeaderHandsOver(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	rest := followersOf(nodes, leader)
	newLeader := make(chan string, 1)
	leader.node.beforeRaftShutdown = func() {
		for _, tn := range rest {
			if tn.node.IsLeader() {
				newLeader <- tn.id
				return
			}
		}
		newLeader <- ""
	}
	leader.stop()
	got := <-newLeader
	require.NotEmpty(t, got, "no follower led when the old leader's raft stopped")
	apply(t, rest, setCmd("after", "handover"))
}

// A cluster of one has no one to hand over to: Shutdown stops at once.
func TestShutdownAloneDoesNotWait(t *testing.T) {
	t.Parallel()
	tn := newTestNode(t, nodeOpts{id: "n1", bootstrap: true})
	start := time.Now()
	tn.stop()
	require.Less(t, time.Since(start), tn.node.handOverWait())
}

// transfer-leader through a follower moves leadership to the member named;
// without an id to any other voter; to the leader itself it changes
// nothing; an unknown member is 404, a cluster of one 409.
func TestTransferLeader(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	f := followersOf(nodes, leader)
	target, via := f[0], f[1]

	out, err := via.client().TransferLeader(ctxT(t), target.id)
	require.NoError(t, err)
	require.Equal(t, target.id, out.Leader)
	require.Equal(t, target, leaderOf(t, nodes))

	out, err = target.client().TransferLeader(ctxT(t), target.id)
	require.NoError(t, err)
	require.Equal(t, target.id, out.Leader, "to the leader itself: nothing moves")
	require.Equal(t, target, leaderOf(t, nodes))

	out, err = leader.client().TransferLeader(ctxT(t), "")
	require.NoError(t, err)
	require.NotEqual(t, target.id, out.Leader)
	require.Equal(t, out.Leader, leaderOf(t, nodes).id)

	_, err = via.client().TransferLeader(ctxT(t), "n9")
	requireAPIStatus(t, err, http.StatusNotFound, "n9")
	apply(t, nodes, setCmd("after", "transfers"))

	alone := newTestNode(t, nodeOpts{id: "a1", bootstrap: true})
	_, err = alone.client().TransferLeader(ctxT(t), "")
	requireAPIStatus(t, err, http.StatusConflict, "only voter")
}
