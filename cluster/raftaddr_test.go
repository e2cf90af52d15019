package cluster

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// nameNode starts a node listening on 127.0.0.1:port (0: a free one) whose
// raft_addr is written as the name localhost:PORT, as a StatefulSet gives
// herald-N.herald.NS.svc.cluster.local:7101.
func nameNode(t *testing.T, o nodeOpts, port string) (*testNode, string) {
	t.Helper()
	if port == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		_, port, err = net.SplitHostPort(ln.Addr().String())
		require.NoError(t, err)
		require.NoError(t, ln.Close())
	}
	name := net.JoinHostPort("localhost", port)
	o.raftAddr = net.JoinHostPort("127.0.0.1", port)
	o.modify = func(c *Config) { c.RaftAddr = name }
	return newTestNode(t, o), name
}

// A member's raft_addr is kept as written: a DNS name is what the Raft
// configuration and the member record store, what the leader advertises
// to its followers and what the others dial, never the IP it resolved to
// at start. So a member whose IP changes under a stable name (a
// StatefulSet pod rescheduled) keeps its membership. Before this, the
// transport advertised the address resolved at start (127.0.0.1:PORT for
// localhost:PORT), so followers knew the leader by an IP that a restart
// elsewhere would make stale.
func TestRaftAddrNameKeptAsWritten(t *testing.T) {
	t.Parallel()
	n1, name1 := nameNode(t, nodeOpts{id: "n1", bootstrap: true}, "")
	n2, name2 := nameNode(t, nodeOpts{id: "n2", join: n1.httpAddr()}, "")
	nodes := []*testNode{n1, n2}
	want := map[string]string{"n1": name1, "n2": name2}
	require.Eventually(t, func() bool {
		for _, tn := range nodes {
			if len(servers(t, tn.node)) != 2 || tn.sm.member("n1").RaftAddr != name1 || tn.sm.member("n2").RaftAddr != name2 {
				return false
			}
		}
		return true
	}, waitTimeout, 10*time.Millisecond, "n2 did not join")
	for _, tn := range nodes {
		require.Equal(t, want, servers(t, tn.node), "%s: the Raft configuration holds the names", tn.id)
		for _, m := range tn.node.Status().Members {
			require.Equal(t, want[m.ID], m.RaftAddr)
		}
	}
	leader := leaderOf(t, nodes)
	follower := followersOf(nodes, leader)[0]
	require.Equal(t, raftAddrOf(leader), leader.node.stream.Addr().String(), "advertised as written")
	require.Eventually(t, func() bool {
		addr, id := follower.node.raft.LeaderWithID()
		return string(id) == leader.id && string(addr) == raftAddrOf(leader)
	}, waitTimeout, 10*time.Millisecond, "the follower knows the leader by its name")
	apply(t, nodes, setCmd("via", "name"))
	require.Eventually(t, func() bool { return follower.sm.get("via") == "name" }, waitTimeout, 10*time.Millisecond)

	// n2 restarts under the same name (a pod back with its volume): it
	// resumes as the same member at the same address, and replicates.
	dir := n2.dir
	_, port, err := net.SplitHostPort(name2)
	require.NoError(t, err)
	n2.stop()
	n2, _ = nameNode(t, nodeOpts{id: "n2", dir: dir}, port)
	nodes = []*testNode{n1, n2}
	apply(t, nodes, setCmd("after", "restart"))
	require.Eventually(t, func() bool { return n2.sm.get("after") == "restart" }, waitTimeout, 10*time.Millisecond)
	require.Equal(t, want, servers(t, n1.node))
	require.Equal(t, want, servers(t, n2.node))
}

func raftAddrOf(tn *testNode) string { return tn.node.cfg.RaftAddr }
