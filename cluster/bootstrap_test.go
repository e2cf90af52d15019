package cluster

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The bootstrapping member's data dir is wiped and it is restarted with
// its original config (--bootstrap, same address): the live cluster's
// leader reaches it while it listens, and it rejoins as the same member
// with the cluster's id and state, instead of forming a second cluster.
func TestWipedBootstrapNodeRejoins(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	apply(t, nodes, setCmd("before", "wipe"))
	waitValue(t, nodes, "before", "wipe")
	id := nodes[1].node.ClusterID()
	require.NotEmpty(t, id)

	n1 := nodes[0]
	n1.node.noHandOver = true // lost as in a crash: no leader for a moment
	n1.stop()
	require.NoError(t, os.RemoveAll(n1.dir))
	back := newTestNode(t, nodeOpts{id: "n1", dir: n1.dir, raftAddr: n1.raftAddr, bootstrap: true})
	require.Equal(t, startRejoin, back.node.startMode)
	nodes = []*testNode{back, nodes[1], nodes[2]}
	waitValue(t, nodes, "before", "wipe")
	waitConverged(t, nodes)
	require.Eventually(t, func() bool { return back.node.ClusterID() == id }, waitTimeout, 10*time.Millisecond)
	apply(t, nodes, setCmd("after", "rejoin"))
	waitValue(t, nodes, "after", "rejoin")
}

// With peers configured, a wiped node asks them first and rejoins through
// them, even at a new Raft address (where no leader would find it).
func TestWipedBootstrapNodeRejoinsViaPeers(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	apply(t, nodes, setCmd("k", "v"))
	id := nodes[1].node.ClusterID()

	n1 := nodes[0]
	n1.node.noHandOver = true // lost as in a crash: no leader for a moment
	n1.stop()
	require.NoError(t, os.RemoveAll(n1.dir))
	back := newTestNode(t, nodeOpts{id: "n1", dir: n1.dir, bootstrap: true, modify: func(c *Config) {
		c.Peers = []string{nodes[1].httpAddr(), nodes[2].httpAddr()}
		c.BootstrapWait = -1 // the peers alone must decide
	}})
	require.Equal(t, startRejoin, back.node.startMode)
	require.Equal(t, id, back.node.ClusterID())
	nodes = []*testNode{back, nodes[1], nodes[2]}
	waitConverged(t, nodes)
	waitValue(t, nodes, "k", "v")
}

// A node told to bootstrap whose peers belong to a cluster that does not
// list it refuses to start, saying what to do instead.
func TestBootstrapRefusedBesideAnotherCluster(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 1, nil, nil)
	_, err := tryTestNode(t, nodeOpts{id: "n9", bootstrap: true, modify: func(c *Config) {
		c.Peers = []string{freeAddr(t), nodes[0].httpAddr()}
	}})
	require.ErrorIs(t, err, ErrClusterExists)
	require.Contains(t, err.Error(), "--join "+nodes[0].httpAddr())
	require.Len(t, servers(t, nodes[0].node), 1)
}

// Peers that do not answer (a new cluster's first start, the others not
// up yet) do not stop the bootstrap.
func TestBootstrapWithSilentPeers(t *testing.T) {
	t.Parallel()
	n := newTestNode(t, nodeOpts{id: "n1", bootstrap: true, modify: func(c *Config) {
		c.Peers = []string{freeAddr(t), freeAddr(t)}
	}})
	require.Equal(t, startBootstrap, n.node.startMode)
	require.NotEmpty(t, n.node.ClusterID())
}

// Without the bootstrap wait (as if the old leader had not reached it in
// time), a wiped member bootstraps a new cluster, and the old leader then
// absorbs it: the node notices that it follows a leader of another cluster
// and fails, instead of looking healthy under a foreign id.
func TestAbsorbedBootstrapNodeFails(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	apply(t, nodes, setCmd("k", "v"))
	n1 := nodes[0]
	n1.node.noHandOver = true // lost as in a crash: no leader for a moment
	n1.stop()
	require.NoError(t, os.RemoveAll(n1.dir))
	back := newTestNode(t, nodeOpts{id: "n1", dir: n1.dir, raftAddr: n1.raftAddr, bootstrap: true,
		modify: func(c *Config) { c.BootstrapWait = -1 }})
	require.Equal(t, startBootstrap, back.node.startMode)
	select {
	case <-back.node.Failed():
	case <-time.After(waitTimeout):
		t.Fatal("the absorbed node did not notice")
	}
	require.ErrorIs(t, back.node.Err(), ErrForeignCluster)
	require.Contains(t, back.node.Err().Error(), "--join")
	require.Nil(t, nodes[1].node.Err())
}
