package cluster

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// raftCall sends one harmless Raft RPC (a vote request for term 0, which
// every node turns down) to target with the given TLS config: nil when
// the node answered, the error when it hung up.
func raftCall(t *testing.T, conf *tls.Config, target string) error {
	t.Helper()
	st, err := listen("127.0.0.1:0", nil, conf, time.Second)
	require.NoError(t, err)
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: st, MaxPool: 1, Timeout: 5 * time.Second, Logger: hclog.NewNullLogger()})
	defer tr.Close()
	var resp raft.RequestVoteResponse
	return tr.RequestVote("probe", raft.ServerAddress(target),
		&raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("probe"), Addr: []byte(st.Addr().String())}}, &resp)
}

// A member removed with `herald cluster remove` still holds a certificate
// the cluster's CA signed. It can no longer open a Raft connection to any
// member (it could ask for votes, or claim to lead with a higher term),
// and a connection it opened before its removal is closed.
func TestRemovedMemberCannotOpenRaftConnections(t *testing.T) {
	t.Parallel()
	_, stores := devTLS(t, "n1", "n2", "n3", "n4")
	withTLS := func(c *Config) { c.TLS = stores[c.NodeID].RaftConfig() }
	nodes := newCluster(t, 4, nil, withTLS) // joins, with the check on
	leader := leaderOf(t, nodes)
	victim := followersOf(nodes, leader)[0]
	victimTLS := stores[victim.id].RaftConfig()

	require.NoError(t, raftCall(t, victimTLS, leader.raftAddr), "a member is heard")
	// A connection opened while it is a member, kept open.
	held, err := tls.Dial("tcp", leader.raftAddr, victimTLS)
	require.NoError(t, err)
	defer held.Close()
	closed := make(chan error, 1)
	go func() {
		_, err := held.Read(make([]byte, 1))
		closed <- err
	}()

	require.NoError(t, leader.client().Remove(ctxT(t), victim.id))
	victim.stop()
	rest := followersOf(nodes, victim)
	require.Eventually(t, func() bool {
		for _, tn := range rest {
			if _, in := servers(t, tn.node)[victim.id]; in || tn.node.leaderID() == "" {
				return false
			}
		}
		return true
	}, waitTimeout, 10*time.Millisecond)

	for _, tn := range rest {
		err := raftCall(t, victimTLS, tn.raftAddr)
		require.Error(t, err, "%s hears a removed member", tn.id)
	}
	select {
	case err := <-closed:
		require.Error(t, err)
	case <-time.After(waitTimeout):
		t.Fatal("the removed member's open connection was not closed")
	}

	// Members are still heard, and the cluster still commits.
	member := followersOf(rest, leaderOf(t, rest))[0]
	require.NoError(t, raftCall(t, stores[member.id].RaftConfig(), leaderOf(t, rest).raftAddr))
	apply(t, rest, setCmd("after", "removal"))
	waitValue(t, rest, "after", "removal")
}

// Certificates that do not name node ids (a PKI of the operator's own,
// naming hosts) say nothing of membership: such a cluster is checked by
// CA alone, as before, rather than locked out.
func TestRaftPeerCheckNeedsCertificatesNamingNodes(t *testing.T) {
	t.Parallel()
	conf := testTLS(t) // one certificate, "herald-test", for every node
	nodes := newCluster(t, 3, nil, func(c *Config) { c.TLS = conf })
	leader := leaderOf(t, nodes)
	require.NoError(t, raftCall(t, conf, leader.raftAddr))
	require.Nil(t, nodes[0].node.admitRaftPeer(ownCertificate(conf)))
}

// Node ids are often the nodes' host names, and `herald tls init --hosts`
// then lists them all: every certificate carries every node's name as a
// DNS name. A node that is not a member (never added, or removed) must
// still be refused: its certificate's own name (the common name) is what
// says which node it is, not the hosts it may serve.
func TestRaftPeerCheckWhenHostsNameEveryNode(t *testing.T) {
	t.Parallel()
	names := []string{"n1", "n2", "n3", "n4"}
	_, stores := devTLSHosts(t, append([]string{"127.0.0.1", "localhost", testLoopback(t)}, names...), names...)
	nodes := newCluster(t, 3, nil, func(c *Config) { c.TLS = stores[c.NodeID].RaftConfig() })
	leader := leaderOf(t, nodes)
	member := followersOf(nodes, leader)[0]

	require.NoError(t, raftCall(t, stores[member.id].RaftConfig(), leader.raftAddr), "a member is heard")
	require.Error(t, raftCall(t, stores["n4"].RaftConfig(), leader.raftAddr), "a node that is no member is heard")
	// The reason names the one name that counts, not the hosts the
	// certificate also carries (which include the members' ids).
	require.ErrorContains(t, leader.node.admitRaftPeer(ownCertificate(stores["n4"].RaftConfig())), `common name "n4" is the id of no member`)
}

// A member restarted with a data dir whose configuration predates its
// leader (it was down while that node was added) learns the leader from
// the leader's first RPC, before the entries that make the leader a member
// reach it: raft sets the leader before it checks the log, and a snapshot
// or a long catch-up takes many RPCs. Such a member must keep taking the
// leader's connections (and not close them at the next sweep), or it never
// catches up.
func TestRaftPeerCheckTakesALeaderNewerThanTheConfiguration(t *testing.T) {
	t.Parallel()
	_, stores := devTLS(t, "m", "n2", "n3", "n4")
	conf := raft.DefaultConfig()
	conf.LocalID = "m"
	conf.HeartbeatTimeout, conf.ElectionTimeout = time.Hour, time.Hour // no election: the leader stays known
	conf.LeaderLeaseTimeout = time.Hour
	conf.Logger = hclog.NewNullLogger()
	addr, trans := raft.NewInmemTransport("m")
	r, err := raft.NewRaft(conf, &raft.MockFSM{}, raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore(), trans)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	require.NoError(t, r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{
		{ID: "m", Address: addr}, {ID: "n2", Address: "n2"}, {ID: "n3", Address: "n3"},
	}}).Error())

	// n4, added while m was down and now leading, sends its first
	// AppendEntries: m's log lacks its previous entry (and the
	// configuration with n4 in it).
	leaderAddr, leaderTrans := raft.NewInmemTransport("n4")
	leaderTrans.Connect(addr, trans)
	var resp raft.AppendEntriesResponse
	require.NoError(t, leaderTrans.AppendEntries("m", addr, &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n4"), Addr: []byte(leaderAddr)},
		Term:      5, PrevLogEntry: 100, PrevLogTerm: 5,
	}, &resp))
	require.False(t, resp.Success)
	_, leader := r.LeaderWithID()
	require.Equal(t, raft.ServerID("n4"), leader)

	n := &Node{cfg: Config{NodeID: "m", TLS: stores["m"].RaftConfig()}, raft: r, sm: newTestSM()}
	require.NoError(t, n.admitRaftPeer(ownCertificate(stores["n4"].RaftConfig())), "m refuses its own leader")
}

// A node whose certificate's common name is not its id would be added,
// and then every member that knows its leader would refuse its Raft
// connections: it could never be elected, nor take a leadership transfer.
// The leader sees that certificate when it dials the node before adding
// it, and refuses the join with the reason. (It also catches a
// --raft-addr that is another node's address.)
func TestJoinRefusesACertificateNamingAnotherNode(t *testing.T) {
	t.Parallel()
	_, stores := devTLS(t, "n1", "n2", "n9")
	tlsOf := func(name string) func(*Config) { return func(c *Config) { c.TLS = stores[name].RaftConfig() } }
	leader := newTestNode(t, nodeOpts{id: "n1", bootstrap: true, modify: tlsOf("n1")})
	wrong := newTestNode(t, nodeOpts{id: "n2", noStart: true, modify: tlsOf("n9")})

	err := leader.client().Join(ctxT(t), JoinRequest{ID: "n2", RaftAddr: wrong.raftAddr, HTTPAddr: wrong.httpAddr()})
	require.ErrorContains(t, err, `common name is "n9", not "n2"`)
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 400, ae.Status)
	require.NotContains(t, servers(t, leader.node), "n2", "nothing changed")
}
