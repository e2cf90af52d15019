package cluster

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A removed member is refused when it joins again, whoever it asks and
// with whatever data dir, with the reason, until an admin readmits it;
// then it joins. (On the code before removed members were recorded, the
// second join was taken.)
func TestRemovedMemberStaysOut(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, withSecret(testSecret))
	leader := leaderOf(t, nodes)
	victim := followersOf(nodes, leader)[0]
	other := followersOf(nodes, leader)[1]
	victim.stop()
	require.NoError(t, other.client().Remove(ctxT(t), victim.id), "removed through a follower")
	rest := []*testNode{leader, other}
	require.Eventually(t, func() bool {
		for _, tn := range rest {
			if _, ok := tn.sm.RemovedMember(victim.id); !ok {
				return false
			}
			if _, in := servers(t, tn.node)[victim.id]; in {
				return false
			}
		}
		return true
	}, waitTimeout, 10*time.Millisecond, "every member records the removal")

	for _, via := range rest {
		_, err := tryTestNode(t, nodeOpts{id: victim.id, join: via.httpAddr(), modify: withSecret(testSecret)})
		requireAPIStatus(t, err, http.StatusForbidden, "was removed from this cluster")
		require.Contains(t, err.Error(), "herald cluster readmit "+victim.id)
	}
	_, in := servers(t, leader.node)[victim.id]
	require.False(t, in)

	err := other.client().Readmit(ctxT(t), "stranger")
	requireAPIStatus(t, err, http.StatusNotFound, "not a removed member")
	require.NoError(t, other.client().Readmit(ctxT(t), victim.id))
	back := newTestNode(t, nodeOpts{id: victim.id, join: other.httpAddr(), modify: withSecret(testSecret)})
	waitConverged(t, []*testNode{leader, other, back})
	_, removed := back.sm.RemovedMember(victim.id)
	require.False(t, removed)
}

// A removed member's certificate opens no Raft connection even to a member
// that knows no leader (which takes any other peer the CA signed: it must
// hear from whoever leads next). On the code before, it was taken there.
func TestRemovedMemberRefusedOnRaftWithoutLeader(t *testing.T) {
	t.Parallel()
	_, stores := devTLS(t, "n1", "n2", "n3")
	nodes := newCluster(t, 3, nil, func(c *Config) { c.TLS = stores[c.NodeID].RaftConfig() })
	leader := leaderOf(t, nodes)
	victim := followersOf(nodes, leader)[0]
	other := followersOf(nodes, leader)[1]
	victim.stop()
	require.NoError(t, leader.client().Remove(ctxT(t), victim.id))
	require.Eventually(t, func() bool {
		_, ok := other.sm.RemovedMember(victim.id)
		return ok
	}, waitTimeout, 10*time.Millisecond)
	leader.stop()
	require.Eventually(t, func() bool { return other.node.leaderID() == "" }, waitTimeout, 10*time.Millisecond, "other knows no leader")

	require.Error(t, raftCall(t, stores[victim.id].RaftConfig(), other.raftAddr), "the removed member is refused")
	require.NoError(t, raftCall(t, stores[leader.id].RaftConfig(), other.raftAddr), "a member is heard")
}
