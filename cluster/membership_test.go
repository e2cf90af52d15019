package cluster

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

// A join request that claims the leader's own Raft address under another
// id, or the leader's id at another address, is an operator's mistake: it
// must not remove the leader from the cluster or move it.
func TestJoinRefusesTheLeadersIdentity(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	before := servers(t, leader.node)
	ctx := ctxT(t)

	err := leader.client().Join(ctx, JoinRequest{ID: "n9", RaftAddr: leader.raftAddr, HTTPAddr: "127.0.0.1:1"})
	requireAPIStatus(t, err, http.StatusConflict, leader.id)

	// Something answers there, so only the identity check can refuse it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	err = leader.client().Join(ctx, JoinRequest{ID: leader.id, RaftAddr: ln.Addr().String(), HTTPAddr: "127.0.0.1:1"})
	requireAPIStatus(t, err, http.StatusConflict, leader.id)

	require.True(t, leader.node.IsLeader())
	require.Equal(t, before, servers(t, leader.node))
}

// Two processes with one id are a mistake (a copied config); the one that
// joins last must not silently evict the one still running.
func TestJoinRefusesAnIDStillRunningElsewhere(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	alive := followersOf(nodes, leader)[0]

	_, err := tryTestNode(t, nodeOpts{id: alive.id, join: leader.httpAddr()})
	require.Error(t, err)
	require.Contains(t, err.Error(), "still running")
	requireAPIStatus(t, err, http.StatusConflict, alive.raftAddr)
	require.Equal(t, alive.raftAddr, servers(t, leader.node)[alive.id])
	require.Equal(t, alive.httpAddr(), leader.sm.member(alive.id).HTTPAddr)
}

// Removing the leader by id, through a follower: the leader hands
// leadership over and the new leader removes it.
func TestRemoveTheLeaderThroughAFollower(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	f := followersOf(nodes, leader)[0]
	require.NoError(t, f.client().Remove(ctxT(t), leader.id))
	rest := followersOf(nodes, leader)
	require.Eventually(t, func() bool {
		for _, tn := range rest {
			if _, in := servers(t, tn.node)[leader.id]; in || tn.sm.member(leader.id).ID != "" {
				return false
			}
		}
		return true
	}, waitTimeout, 10*time.Millisecond, "the old leader was not removed")
	apply(t, rest, setCmd("after", "remove"))
}

// A join naming another id at a live member's Raft address is a mistake
// (a typo in `herald cluster join --raft-addr`, or a request crafted by
// someone who only holds the cluster secret): the live member answers the
// Raft probe, so only an explicit check can tell it from a dead
// predecessor. It must be refused, not remove a healthy voter.
func TestJoinRefusesALiveMembersRaftAddr(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	alive := followersOf(nodes, leader)[0]
	before := servers(t, leader.node)

	err := leader.client().Join(ctxT(t), JoinRequest{ID: "n9", RaftAddr: alive.raftAddr, HTTPAddr: "127.0.0.1:1"})
	requireAPIStatus(t, err, http.StatusConflict, alive.id)
	require.Equal(t, before, servers(t, leader.node))
	require.Equal(t, alive.httpAddr(), leader.sm.member(alive.id).HTTPAddr)
}

// A new id at the Raft address of a member that is gone (its machine was
// rebuilt under another name) replaces the dead entry.
func TestJoinReplacesADeadMemberAtItsRaftAddr(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	dead := followersOf(nodes, leader)[0]
	dead.stop()

	fresh := newTestNode(t, nodeOpts{id: "n9", raftAddr: dead.raftAddr, join: leader.httpAddr()})
	require.Eventually(t, func() bool {
		s := servers(t, leader.node)
		_, old := s[dead.id]
		return !old && s[fresh.id] == dead.raftAddr
	}, waitTimeout, 10*time.Millisecond, "the dead member was not replaced")
	require.Empty(t, leader.sm.member(dead.id).ID)
}

// Removing a live voter while another is down would leave a configuration
// whose majority cannot answer: the leader's own commit of the change
// already needs the dead node, it steps down, and nobody can be elected
// until the dead node returns (never, if its machine is gone). The leader
// refuses it and says to remove the dead one first.
func TestRemoveRefusesWhatWouldLoseQuorum(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	fs := followersOf(nodes, leader)
	alive, dead := fs[0], fs[1]
	dead.stop()

	err := leader.client().Remove(ctxT(t), alive.id)
	requireAPIStatus(t, err, http.StatusConflict, dead.id)
	require.Contains(t, servers(t, leader.node), alive.id)
	rest := []*testNode{leader, alive}
	apply(t, rest, setCmd("still", "writable"))

	// The dead one first: then the live one may go.
	require.NoError(t, leader.client().Remove(ctxT(t), dead.id))
	require.NoError(t, leader.client().Remove(ctxT(t), alive.id))
	require.Equal(t, map[string]string{leader.id: leader.raftAddr}, servers(t, leader.node))
}

// A join naming a live member's id and Raft address with another HTTP
// address (a typo in `herald cluster join --http-addr`) must not rewrite
// its record: every node's calls to it (its build for rolling upgrades,
// liveness checks, status) would go to the wrong address until it leads
// or restarts. A node that really moved no longer answers at the old
// address and is updated (TestRestartedNodeRejoinsWithItsData).
func TestJoinRefusesToMoveALiveMembersHTTPAddr(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	alive := followersOf(nodes, leader)[0]

	err := leader.client().Join(ctxT(t), JoinRequest{ID: alive.id, RaftAddr: alive.raftAddr, HTTPAddr: "127.0.0.1:1"})
	requireAPIStatus(t, err, http.StatusConflict, alive.httpAddr())
	require.Equal(t, alive.httpAddr(), leader.sm.member(alive.id).HTTPAddr)
}

// A join's HTTP address is what every member dials to forward writes and
// read the member's status: one they could not dial is refused with 400,
// like a bad Raft address. A wildcard host is the worst: dialled, it
// reaches the dialling machine itself, so a follower forwarded writes to
// itself and answered 503.
func TestJoinRefusesABadHTTPAddr(t *testing.T) {
	t.Parallel()
	leader := newTestNode(t, nodeOpts{id: "n1", bootstrap: true})
	leaderOf(t, []*testNode{leader})
	ctx := ctxT(t)
	for _, addr := range []string{"0.0.0.0:8102", "[::]:8102", ":8102", "https://0.0.0.0:8102", "127.0.0.1", "127.0.0.1:8102/x",
		"http://127.0.0.1:8102?a=b", "ftp://127.0.0.1:8102", "http://user@127.0.0.1:8102"} {
		err := leader.client().Join(ctx, JoinRequest{ID: "n2", RaftAddr: freeAddr(t), HTTPAddr: addr})
		requireAPIStatus(t, err, http.StatusBadRequest, "http_addr")
	}
	require.Equal(t, map[string]string{"n1": leader.raftAddr}, servers(t, leader.node))
	for _, addr := range []string{"127.0.0.1:8102", "https://herald-2.example:8102", "http://[::1]:8102", "https://127.0.0.1:8102/"} {
		require.NoError(t, JoinRequest{ID: "n2", RaftAddr: "127.0.0.1:7102", HTTPAddr: addr}.validate(), addr)
	}
}

// The leader asked to remove itself while another voter is down: the
// removal is refused as any other would be, and before anything changes
// (it handed leadership over first, then the new leader refused).
func TestRemovingTheLeaderIsRefusedBeforeItHandsOver(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	followersOf(nodes, leader)[1].stop()
	term := leader.node.raft.CurrentTerm()

	err := leader.client().Remove(ctxT(t), leader.id)
	requireAPIStatus(t, err, http.StatusConflict, "do not answer")
	err = leader.client().Leave(ctxT(t))
	requireAPIStatus(t, err, http.StatusConflict, "do not answer")
	require.True(t, leader.node.IsLeader())
	require.Equal(t, term, leader.node.raft.CurrentTerm(), "leadership was handed over")
}

// A join's id names the node in logs, metric labels and the replicated
// member record: spaces, control characters or a megabyte of it are refused
// with 400 naming the id, before anything changes.
func TestJoinRefusesABadID(t *testing.T) {
	t.Parallel()
	leader := newTestNode(t, nodeOpts{id: "n1", bootstrap: true})
	leaderOf(t, []*testNode{leader})
	ctx := ctxT(t)
	for _, id := range []string{"n 2", "n2\n", "-n2", "n2/../x", strings.Repeat("n", 65), "名字"} {
		err := leader.client().Join(ctx, JoinRequest{ID: id, RaftAddr: freeAddr(t), HTTPAddr: "127.0.0.1:1"})
		requireAPIStatus(t, err, http.StatusBadRequest, "id")
	}
	require.Equal(t, map[string]string{"n1": leader.raftAddr}, servers(t, leader.node))
	for _, id := range []string{"n2", "herald-2.prod", "N_2", strings.Repeat("n", 64)} {
		require.NoError(t, JoinRequest{ID: id, RaftAddr: "127.0.0.1:7102", HTTPAddr: "127.0.0.1:8102"}.validate(), id)
	}
}

// A member's reported build is recorded printable and at most maxBuildLen
// bytes: it goes into the replicated log each time it changes.
func TestMemberBuildIsBounded(t *testing.T) {
	require.Equal(t, "v1.2.3 (abc)", memberBuild("v1.2.3 (abc)"))
	require.Equal(t, "v1x", memberBuild("v1\x00\nx"))
	long := memberBuild(strings.Repeat("构", 1<<20))
	require.LessOrEqual(t, len(long), maxBuildLen)
	require.True(t, utf8.ValidString(long))
	require.Equal(t, strings.Repeat("构", maxBuildLen/3), long)
}
