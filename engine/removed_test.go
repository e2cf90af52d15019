package engine

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// A removed member's record is replicated, kept by a snapshot (which then
// needs FSM version 4, and only then), and dropped by a readmit.
func TestRemovedMembers(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	snapshotOf := func() (SnapshotInfo, []byte) {
		t.Helper()
		snap, err := b.fsm.Snapshot()
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, snap.Persist(&buf))
		snap.Release()
		info, err := InspectSnapshot(bytes.NewReader(buf.Bytes()))
		require.NoError(t, err)
		return info, buf.Bytes()
	}
	info, _ := snapshotOf()
	require.Less(t, info.FSMVersion, FSMRemovedMembers, "nothing removed: a version-3 member still takes the snapshot")

	require.Nil(t, b.apply(CmdRevokeMember, RevokeMember{ID: "n3", At: t0, By: "admin"}))
	require.Nil(t, b.apply(CmdRevokeMember, RevokeMember{ID: "n3", At: t0.Add(1), By: "other"}), "a repeated removal keeps the first record")
	got, ok := b.fsm.RemovedMember("n3")
	require.True(t, ok)
	require.Equal(t, RemovedMember{ID: "n3", At: t0, By: "admin"}, got)

	info, raw := snapshotOf()
	require.Equal(t, FSMRemovedMembers, info.FSMVersion)
	restored := NewFSM()
	require.NoError(t, restored.Restore(bytes.NewReader(raw)))
	require.Equal(t, []RemovedMember{{ID: "n3", At: t0, By: "admin"}}, restored.RemovedMembers())

	require.ErrorIs(t, b.apply(CmdReadmitMember, ReadmitMember{ID: "n4", At: t0}).(error), ErrNotRemoved)
	require.Nil(t, b.apply(CmdReadmitMember, ReadmitMember{ID: "n3", At: t0, By: "admin"}))
	_, ok = b.fsm.RemovedMember("n3")
	require.False(t, ok)
	require.Empty(t, b.fsm.RemovedMembers())
}
