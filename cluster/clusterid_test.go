package cluster

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every member of a cluster, joined by itself or added by an operator,
// carries the id its bootstrapping node drew.
func TestMembersShareTheClusterID(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	w := newTestNode(t, nodeOpts{id: "n4"})
	require.NoError(t, nodes[0].client().Join(ctxT(t), JoinRequest{ID: w.id, RaftAddr: w.raftAddr, HTTPAddr: w.httpAddr()}))
	id := nodes[0].node.ClusterID()
	require.Len(t, id, 32)
	require.Eventually(t, func() bool {
		for _, tn := range append(nodes, w) {
			if tn.node.ClusterID() != id {
				return false
			}
		}
		return true
	}, waitTimeout, 10*time.Millisecond, "not every member learnt the cluster id")
	st, err := w.client().Status(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, id, st.ClusterID)
}

// A data dir from another cluster, started with --join, must not be added
// to this one: Raft cannot tell the two logs apart and would stack this
// cluster's entries on the other's state. Start fails and says why; the
// leader refuses such a join too.
func TestForeignDataDirIsRefused(t *testing.T) {
	t.Parallel()
	a := newTestNode(t, nodeOpts{id: "a1", bootstrap: true})
	leaderOf(t, []*testNode{a})
	waitConverged(t, []*testNode{a})

	b := newTestNode(t, nodeOpts{id: "b1", bootstrap: true})
	apply(t, []*testNode{b}, setCmd("from", "b"))
	b.stop()

	_, err := tryTestNode(t, nodeOpts{id: "b1", dir: b.dir, join: a.httpAddr()})
	require.ErrorIs(t, err, ErrForeignCluster)
	require.Contains(t, err.Error(), "empty data dir")
	require.Equal(t, map[string]string{"a1": a.raftAddr}, servers(t, a.node))

	err = a.client().Join(ctxT(t), JoinRequest{ID: "b1", RaftAddr: b.raftAddr, HTTPAddr: "127.0.0.1:1", ClusterID: "0123"})
	requireAPIStatus(t, err, http.StatusConflict, "another cluster")
	require.Contains(t, err.Error(), "empty data dir")
	require.Equal(t, map[string]string{"a1": a.raftAddr}, servers(t, a.node))
}
