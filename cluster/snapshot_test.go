package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// A follower that was down while the leader snapshotted and compacted its
// log catches up through InstallSnapshot; a node restarted on its own
// snapshot has the state before any leader contact.
func TestSnapshotAndRestoreThroughRaft(t *testing.T) {
	t.Parallel()
	lowSnap := func(c *Config) {
		c.SnapshotThreshold = 8
		c.SnapshotInterval = 20 * time.Millisecond
		c.TrailingLogs = 2
	}
	nodes := newCluster(t, 3, nil, lowSnap)
	leader := leaderOf(t, nodes)
	ctx := ctxT(t)

	f := followersOf(nodes, leader)[0]
	// The follower has at most what the leader had when it stopped: the
	// leader's log must be compacted past that, or the follower catches
	// up from the log and no snapshot is installed (a flake, 1 run in 20).
	had, err := leader.node.store.LastIndex()
	require.NoError(t, err)
	f.stop()
	for i := range 40 {
		apply(t, followersOf(nodes, f), setCmd(fmt.Sprint("k", i), fmt.Sprint(i)))
	}
	require.Eventually(t, func() bool {
		snaps, err := leader.node.snaps.List()
		require.NoError(t, err)
		first, err := leader.node.store.FirstIndex()
		require.NoError(t, err)
		return len(snaps) > 0 && first > had+1
	}, waitTimeout, 10*time.Millisecond, "the leader did not snapshot and compact past what the follower had")

	back := newTestNode(t, nodeOpts{id: f.id, dir: f.dir, raftAddr: f.raftAddr, modify: lowSnap})
	waitValue(t, []*testNode{back}, "k39", "39")
	require.Positive(t, back.sm.restoreCount(), "caught up through an installed snapshot")
	require.Eventually(t, func() bool {
		snaps, err := back.node.snaps.List()
		require.NoError(t, err)
		return len(snaps) > 0
	}, waitTimeout, 10*time.Millisecond)

	// Restart it again: raft restores its own snapshot inside New, before
	// Start and before hearing from any leader.
	back.stop()
	again := newTestNode(t, nodeOpts{id: f.id, dir: f.dir, raftAddr: f.raftAddr, modify: lowSnap, noStart: true})
	require.Equal(t, 1, again.sm.restoreCount())
	require.NotEmpty(t, again.sm.get("k0"))
	require.NoError(t, again.node.Start(ctx))
	waitValue(t, []*testNode{again}, "k39", "39")
}

// A node whose only snapshot its state machine cannot read (written by a
// newer version, say) must not start, and must say why: raft itself only
// reports "failed to load any existing snapshots".
func TestUnreadableSnapshotFailsNewWithTheCause(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := newTestNode(t, nodeOpts{id: "u", dir: dir, bootstrap: true})
	leaderOf(t, []*testNode{first})
	apply(t, []*testNode{first}, setCmd("a", "1"))
	require.NoError(t, first.node.raft.Snapshot().Error())
	first.stop()

	sm := newTestSM()
	sm.restoreErr = errors.New("snapshot version 9: this binary reads version 1")
	_, err := tryTestNode(t, nodeOpts{id: "u", dir: dir, raftAddr: first.raftAddr, sm: sm, noStart: true})
	require.Error(t, err)
	require.Contains(t, err.Error(), "snapshot version 9: this binary reads version 1")
	require.ErrorIs(t, err, sm.restoreErr)
}

// A node whose newest snapshot its state machine cannot read, but an older
// one it can (a downgrade after the newer build snapshotted once), must
// not start from the older one: the log entries between the two were
// compacted away with the newer snapshot, and raft panicked at the hole
// ("log not found"), saying nothing of the cause. New fails with it.
func TestNewestSnapshotUnreadableFailsNew(t *testing.T) {
	t.Parallel()
	dir, raftAddr := twoSnapshots(t, 2)
	sm := newTestSM()
	sm.refuseKey = "new"
	_, err := tryTestNode(t, nodeOpts{id: "u", dir: dir, raftAddr: raftAddr, sm: sm, noStart: true, modify: noAutoSnapshots(2)})
	require.Error(t, err)
	require.Contains(t, err.Error(), `snapshot holds "new"`)
}

// When the log still reaches back to the older snapshot, raft's fallback
// is sound (the entries after it are replayed) and the node starts.
func TestOlderSnapshotWithItsLogStandsIn(t *testing.T) {
	t.Parallel()
	dir, raftAddr := twoSnapshots(t, 1000)
	sm := newTestSM()
	sm.refuseKey = "new"
	tn := newTestNode(t, nodeOpts{id: "u", dir: dir, raftAddr: raftAddr, sm: sm, modify: noAutoSnapshots(1000)})
	require.Equal(t, 1, sm.restoreCount())
	waitValue(t, []*testNode{tn}, "k9", "x")
}

func noAutoSnapshots(trailing uint64) func(*Config) {
	return func(c *Config) {
		c.SnapshotThreshold = 1 << 20
		c.TrailingLogs = trailing
	}
}

// twoSnapshots leaves a stopped one-node cluster's data dir with two
// snapshots: the older holds "old", the newer "new" too, with ten entries
// between them and trailing entries kept in the log after the newer.
func twoSnapshots(t *testing.T, trailing uint64) (dir, raftAddr string) {
	t.Helper()
	dir = t.TempDir()
	noAutoSnap := noAutoSnapshots(trailing)
	first := newTestNode(t, nodeOpts{id: "u", dir: dir, bootstrap: true, modify: noAutoSnap})
	leaderOf(t, []*testNode{first})
	apply(t, []*testNode{first}, setCmd("old", "1"))
	require.NoError(t, first.node.raft.Snapshot().Error())
	apply(t, []*testNode{first}, setCmd("new", "1"))
	for i := range 10 {
		apply(t, []*testNode{first}, setCmd(fmt.Sprint("k", i), "x"))
	}
	require.NoError(t, first.node.raft.Snapshot().Error())
	snaps, err := first.node.snaps.List()
	require.NoError(t, err)
	require.Len(t, snaps, 2)
	firstIndex, err := first.node.store.FirstIndex()
	require.NoError(t, err)
	if trailing < 10 {
		require.Greater(t, firstIndex, snaps[1].Index+1, "the log between the snapshots must be compacted away")
	} else {
		require.LessOrEqual(t, firstIndex, snaps[1].Index+1, "the log must reach back to the older snapshot")
	}
	first.stop()
	return dir, first.raftAddr
}

// TestRestoreSlowerThanApplyTimeout: a restore that takes longer than
// ApplyTimeout (ten million tasks take minutes) is answered by its
// outcome. raft.Restore's timer runs from the call, so with ApplyTimeout
// passed it refused the no-op after a finished restore as an enqueue
// timeout about every other time; six restores in a row then all
// succeeded once in 64 runs.
func TestRestoreSlowerThanApplyTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 50 * time.Millisecond
	nodes := newCluster(t, 1, nil, func(c *Config) { c.ApplyTimeout = timeout })
	leader := leaderOf(t, nodes)
	for i := range 6 {
		raw, err := json.Marshal(smState{Data: map[string]string{"restored": fmt.Sprint(i)}})
		require.NoError(t, err)
		// The disk under the restore is slow: the state arrives after
		// three times ApplyTimeout.
		r := &slowReader{r: bytes.NewReader(raw), at: time.Now().Add(3 * timeout)}
		meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: 1, Term: 1, Size: int64(len(raw))}
		require.NoError(t, leader.node.restoreRaft(meta, r), "restore %d", i)
		require.Equal(t, fmt.Sprint(i), leader.sm.get("restored"))
	}
}

// slowReader gives r's bytes only from at on.
type slowReader struct {
	r  io.Reader
	at time.Time
}

func (s *slowReader) Read(p []byte) (int, error) {
	<-time.After(time.Until(s.at))
	return s.r.Read(p)
}
