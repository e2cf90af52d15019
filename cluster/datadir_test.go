package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// damagedFollower runs a three-node cluster with k0..k9 everywhere, two
// snapshots on a follower, stops that follower and lets damage break its
// data dir. It returns the follower and the rest.
func damagedFollower(t *testing.T, damage func(dir string)) (*testNode, []*testNode) {
	t.Helper()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	f := followersOf(nodes, leader)[0]
	for i := range 10 {
		apply(t, nodes, setCmd(fmt.Sprint("k", i), fmt.Sprint(i)))
		if i == 4 || i == 9 {
			waitValue(t, []*testNode{f}, fmt.Sprint("k", i), fmt.Sprint(i))
			require.NoError(t, f.node.raft.Snapshot().Error())
		}
	}
	f.stop()
	damage(f.dir)
	return f, followersOf(nodes, f)
}

// requireDamaged checks that the follower refuses to start, naming file
// and the way back; then does what the message says (moves the data dir
// aside, starts empty with --join) and checks the node is back with the
// cluster's whole state.
func requireDamaged(t *testing.T, f *testNode, rest []*testNode, file string) {
	t.Helper()
	_, err := tryTestNode(t, nodeOpts{id: f.id, dir: f.dir, raftAddr: f.raftAddr, noStart: true})
	require.ErrorIs(t, err, ErrDataDirDamaged)
	require.ErrorContains(t, err, file+" cannot be read")
	require.ErrorContains(t, err, "move "+f.dir+" aside")
	require.ErrorContains(t, err, "--join")
	require.ErrorContains(t, err, `README, "A corrupt data dir"`)

	require.NoError(t, os.Rename(f.dir, f.dir+".damaged"))
	back := newTestNode(t, nodeOpts{id: f.id, dir: f.dir, raftAddr: f.raftAddr, join: rest[0].httpAddr()})
	all := append([]*testNode{back}, rest...)
	apply(t, all, setCmd("after", "rejoin"))
	waitValue(t, all, "after", "rejoin")
	for i := range 10 {
		require.Equal(t, fmt.Sprint(i), back.sm.get(fmt.Sprint("k", i)))
	}
	require.Len(t, servers(t, back.node), 3)
}

// newestSnapshot is the id of the newest snapshot in dir.
func newestSnapshot(t *testing.T, dir string) string {
	t.Helper()
	snaps, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	require.NoError(t, err)
	require.Len(t, snaps, 2)
	return snaps[len(snaps)-1].Name() // named term-index-time: sorted oldest first
}

func TestDamagedRaftDBStopsTheNode(t *testing.T) {
	t.Parallel()
	f, rest := damagedFollower(t, func(dir string) {
		// Both of bbolt's meta pages (4 KiB each) overwritten.
		fh, err := os.OpenFile(filepath.Join(dir, "raft.db"), os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = fh.WriteAt(make([]byte, 8192), 0)
		require.NoError(t, err)
		require.NoError(t, fh.Close())
	})
	requireDamaged(t, f, rest, filepath.Join(f.dir, "raft.db"))
}

// A raft.db that is gone beside its snapshots would be created anew: the
// node would forget its term and vote.
func TestMissingRaftDBStopsTheNode(t *testing.T) {
	t.Parallel()
	f, rest := damagedFollower(t, func(dir string) {
		require.NoError(t, os.Remove(filepath.Join(dir, "raft.db")))
	})
	requireDamaged(t, f, rest, filepath.Join(f.dir, "raft.db"))
}

// The newest snapshot's state file damaged: raft would fall back to the
// older snapshot (the log reaches it here); the node refuses instead.
func TestDamagedSnapshotStopsTheNode(t *testing.T) {
	t.Parallel()
	var file string
	f, rest := damagedFollower(t, func(dir string) {
		file = filepath.Join(dir, "snapshots", newestSnapshot(t, dir), "state.bin")
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		b[len(b)/2] ^= 0xff
		require.NoError(t, os.WriteFile(file, b, 0o600))
	})
	// Nor is it recovered from.
	_, err := Recover(RecoverConfig{DataDir: f.dir, Logger: testLogger()}, newTestSM())
	require.ErrorIs(t, err, ErrDataDirDamaged)
	require.ErrorContains(t, err, file+" cannot be read (CRC mismatch)")
	requireDamaged(t, f, rest, file)
}

// A snapshot whose meta.json does not decode is skipped by raft's store
// without a word; the node refuses instead.
func TestDamagedSnapshotMetaStopsTheNode(t *testing.T) {
	t.Parallel()
	var file string
	f, rest := damagedFollower(t, func(dir string) {
		file = filepath.Join(dir, "snapshots", newestSnapshot(t, dir), "meta.json")
		require.NoError(t, os.WriteFile(file, []byte(`{"Version":1,"ID":`), 0o600))
	})
	requireDamaged(t, f, rest, file)
}
