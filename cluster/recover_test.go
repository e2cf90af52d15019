package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// lostQuorum runs a three-node cluster with entries k0..k19 on every node,
// then stops all three: n1 is the survivor, n2 and n3 are gone for good.
func lostQuorum(t *testing.T) (survivor *testNode, clusterID string) {
	t.Helper()
	nodes := newCluster(t, 3, nil, nil)
	for i := range 20 {
		apply(t, nodes, setCmd(fmt.Sprint("k", i), fmt.Sprint(i)))
	}
	waitValue(t, nodes, "k19", "19")
	clusterID = nodes[0].node.ClusterID()
	require.NotEmpty(t, clusterID)
	for _, tn := range nodes {
		tn.stop()
	}
	return nodes[0], clusterID
}

// A survivor of a lost quorum, recovered offline, starts without
// --bootstrap or --join as the only voter, leads with every committed
// entry, keeps the cluster id, drops the lost members' records, records
// the recovery in the audit trail, and takes fresh nodes as usual.
func TestRecoverMakesTheSurvivorTheOnlyVoter(t *testing.T) {
	t.Parallel()
	n1, clusterID := lostQuorum(t)

	rec, err := Recover(RecoverConfig{DataDir: n1.dir, Logger: testLogger()}, newTestSM())
	require.NoError(t, err)
	require.Equal(t, "n1", rec.NodeID)
	require.Equal(t, clusterID, rec.ClusterID)
	require.Len(t, rec.Old, 3)
	require.Equal(t, []Voter{{ID: "n1", RaftAddr: n1.raftAddr}}, rec.New)
	require.Positive(t, rec.LastIndex)

	started := time.Now()
	back := newTestNode(t, nodeOpts{id: "n1", dir: n1.dir, raftAddr: n1.raftAddr})
	leaderOf(t, []*testNode{back})
	t.Logf("recovered node leads %s after its start (last index %d)", time.Since(started).Round(time.Millisecond), rec.LastIndex)
	require.Equal(t, startExisting, back.node.startMode)
	require.Equal(t, map[string]string{"n1": n1.raftAddr}, servers(t, back.node))
	require.Equal(t, clusterID, back.node.ClusterID())
	for i := range 20 {
		require.Equal(t, fmt.Sprint(i), back.sm.get(fmt.Sprint("k", i)))
	}
	apply(t, []*testNode{back}, setCmd("after", "recover"))

	require.Eventually(t, func() bool {
		return back.sm.member("n2") == (engine.Member{}) && back.sm.member("n3") == (engine.Member{})
	}, waitTimeout, 10*time.Millisecond, "the lost members' records linger")
	require.Eventually(t, func() bool {
		for _, a := range back.sm.auditRecords() {
			if a.Action == "cluster.recover" {
				require.Equal(t, ActorRecover, a.Actor)
				require.Equal(t, "n1", a.Node)
				require.Contains(t, a.Target, "voters n1 (were n1,n2,n3)")
				require.True(t, a.At.Equal(rec.At))
				return true
			}
		}
		return false
	}, waitTimeout, 10*time.Millisecond, "the recovery is not in the audit trail")
	recs, err := pendingRecoveries(back.node.store)
	require.NoError(t, err)
	require.Empty(t, recs, "an audited recovery is forgotten")

	fresh := []*testNode{back}
	for _, id := range []string{"n4", "n5"} {
		fresh = append(fresh, newTestNode(t, nodeOpts{id: id, join: back.httpAddr()}))
	}
	waitConverged(t, fresh)
	waitValue(t, fresh, "after", "recover")
	waitValue(t, fresh, "k0", "0")
	for _, tn := range fresh {
		require.Equal(t, clusterID, tn.node.ClusterID())
	}
}

// Two survivors recovered with the same --voter list form a two-voter
// cluster; the election picks one of them.
func TestRecoverNamesOtherSurvivors(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	apply(t, nodes, setCmd("k", "v"))
	waitValue(t, nodes, "k", "v")
	for _, tn := range nodes {
		tn.stop()
	}
	voters := []Voter{{ID: "n1", RaftAddr: nodes[0].raftAddr}, {ID: "n2", RaftAddr: nodes[1].raftAddr}}
	for _, tn := range nodes[:2] {
		rec, err := Recover(RecoverConfig{DataDir: tn.dir, Voters: voters, Logger: testLogger()}, newTestSM())
		require.NoError(t, err)
		require.ElementsMatch(t, voters, rec.New)
	}
	var back []*testNode
	for _, tn := range nodes[:2] {
		back = append(back, newTestNode(t, nodeOpts{id: tn.id, dir: tn.dir, raftAddr: tn.raftAddr}))
	}
	leaderOf(t, back)
	apply(t, back, setCmd("after", "recover"))
	waitValue(t, back, "after", "recover")
	require.Equal(t, map[string]string{"n1": nodes[0].raftAddr, "n2": nodes[1].raftAddr}, servers(t, back[0].node))
}

// A running node's data dir is not rewritten: bbolt's lock says so within
// a second.
func TestRecoverRefusesAHeldDataDir(t *testing.T) {
	t.Parallel()
	tn := newTestNode(t, nodeOpts{id: "r1", bootstrap: true})
	leaderOf(t, []*testNode{tn})
	_, err := Recover(RecoverConfig{DataDir: tn.dir, Logger: testLogger()}, newTestSM())
	require.ErrorIs(t, err, ErrDataDirInUse)
	require.True(t, tn.node.IsLeader())
}

func TestRecoverRefusesBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"n2", "want ID=RAFT_ADDR"},
		{"=10.0.0.2:7101", "voter id"},
		{"n 2=10.0.0.2:7101", "voter id"},
		{"n2=10.0.0.2", "want host:port"},
		{"n2=0.0.0.0:7101", "not a wildcard"},
		{"n2=10.0.0.2:0", "a fixed port"},
	} {
		_, err := ParseVoter(tc.in)
		require.ErrorIs(t, err, ErrBadRequest, tc.in)
		require.ErrorContains(t, err, tc.want, tc.in)
	}
	v, err := ParseVoter(" n2 = 10.0.0.2:7101 ")
	require.NoError(t, err)
	require.Equal(t, Voter{ID: "n2", RaftAddr: "10.0.0.2:7101"}, v)

	n1, _ := lostQuorum(t)
	for _, tc := range []struct {
		cfg  RecoverConfig
		want string
	}{
		{RecoverConfig{DataDir: n1.dir, Voters: []Voter{{"n2", "10.0.0.2:7101"}, {"n2", "10.0.0.3:7101"}}}, "n2 is named twice"},
		{RecoverConfig{DataDir: n1.dir, Voters: []Voter{{"n2", n1.raftAddr}}}, "the same raft address"},
		{RecoverConfig{DataDir: n1.dir, NodeID: "n2"}, "is the data dir of node n1, not n2"},
		{RecoverConfig{DataDir: t.TempDir()}, "holds no Raft state"},
		{RecoverConfig{DataDir: t.TempDir(), NodeID: "n1"}, "holds no Raft state"},
		{RecoverConfig{}, "data dir is empty"},
	} {
		_, err := Recover(tc.cfg, newTestSM())
		require.ErrorIs(t, err, ErrBadRequest, tc.want)
		require.ErrorContains(t, err, tc.want)
	}
	// Nothing was changed by the refusals: the node resumes its old
	// configuration (three voters, two of them gone: no leader).
	tn := newTestNode(t, nodeOpts{id: "n1", dir: n1.dir, raftAddr: n1.raftAddr})
	require.Len(t, servers(t, tn.node), 3)
}

// A data dir last run by a build that did not record its node id needs
// --node-id.
func TestRecoverNeedsTheIDOfAnOlderBuildsDataDir(t *testing.T) {
	t.Parallel()
	n1, _ := lostQuorum(t)
	store, err := openStore(n1.dir)
	require.NoError(t, err)
	require.NoError(t, store.Set(nodeIDKey, []byte{})) // as before ids were recorded
	require.NoError(t, store.Close())

	_, err = Recover(RecoverConfig{DataDir: n1.dir, Logger: testLogger()}, newTestSM())
	require.ErrorIs(t, err, ErrBadRequest)
	require.ErrorContains(t, err, "does not record its node's id")
	rec, err := Recover(RecoverConfig{DataDir: n1.dir, NodeID: "n1", Logger: testLogger()}, newTestSM())
	require.NoError(t, err)
	require.Equal(t, []Voter{{ID: "n1", RaftAddr: n1.raftAddr}}, rec.New)
}
