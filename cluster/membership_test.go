package cluster

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireAPIStatus asserts err is an APIError with the given status whose
// reason contains want.
func requireAPIStatus(t *testing.T, err error, status int, want string) {
	t.Helper()
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, status, ae.Status, ae.Message)
	require.Contains(t, ae.Message, want)
}

// A join request naming a wildcard or host-less Raft address would add a
// voter nobody can dial; it is refused like the node's own config would be.
func TestJoinRefusesWildcardRaftAddr(t *testing.T) {
	t.Parallel()
	leader := newTestNode(t, nodeOpts{id: "n1", bootstrap: true})
	leaderOf(t, []*testNode{leader})
	ctx := ctxT(t)
	for _, addr := range []string{"0.0.0.0:7104", ":7104", "[::]:7104"} {
		err := leader.client().Join(ctx, JoinRequest{ID: "n2", RaftAddr: addr, HTTPAddr: "127.0.0.1:1"})
		requireAPIStatus(t, err, http.StatusBadRequest, "raft_addr")
	}
	require.Equal(t, map[string]string{"n1": leader.raftAddr}, servers(t, leader.node))
}

// Adding a voter that does not answer would, in a one-node cluster, make
// the quorum two of two for ever: the leader steps down and nobody can be
// elected again. The leader refuses the join instead.
func TestJoinRefusesUnreachableRaftAddr(t *testing.T) {
	t.Parallel()
	leader := newTestNode(t, nodeOpts{id: "n1", bootstrap: true})
	leaderOf(t, []*testNode{leader})
	waitConverged(t, []*testNode{leader})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	dead := freeAddr(t)
	err := leader.client().Join(ctx, JoinRequest{ID: "n2", RaftAddr: dead, HTTPAddr: "127.0.0.1:1"})
	requireAPIStatus(t, err, http.StatusBadGateway, "does not answer")
	require.Equal(t, map[string]string{"n1": leader.raftAddr}, servers(t, leader.node))
	_, err = leader.node.Apply(ctxT(t), setCmd("still", "leading"))
	require.NoError(t, err)
}
