package engine

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A backup restored into another cluster takes that cluster's members
// and everything else from the backup: the rewritten snapshot is the
// backup's body as it was under a header naming the members, and it
// restores to the same state but for the member records.
func TestRewriteSnapshotReplacesOnlyMembers(t *testing.T) {
	t.Parallel()
	b := busyFSM(t, 8)
	b.apply(CmdUpsertMember, Member{ID: "old1", RaftAddr: "10.0.0.1:7000", HTTPAddr: "10.0.0.1:8080", FSMVersion: FSMVersion})
	s, err := b.fsm.Snapshot()
	require.NoError(t, err)
	backup := persist(t, s)
	_, body, _ := bytes.Cut(backup, []byte("\n"))

	own := []Member{{ID: "n1", RaftAddr: "127.0.0.1:9001", HTTPAddr: "127.0.0.1:9101", FSMVersion: FSMVersion, Build: "x"}}
	var out bytes.Buffer
	info, err := RewriteSnapshot(bytes.NewReader(backup), &out, own)
	require.NoError(t, err)
	require.Equal(t, SnapshotVersion, info.Version)
	require.Equal(t, b.fsm.AppliedIndex(), info.Applied)
	outHead, outBody, _ := bytes.Cut(out.Bytes(), []byte("\n"))
	require.True(t, bytes.Equal(body, outBody), "the body passes through as it came")
	var h snapshotHeader
	require.NoError(t, json.Unmarshal(outHead, &h))
	require.Equal(t, FSMSnapshotMembers, h.FSMVersion, "a build that would keep the body's members refuses it")
	require.Equal(t, &own, h.Members)

	r := NewFSM()
	require.NoError(t, r.Restore(bytes.NewReader(out.Bytes())))
	require.Equal(t, own, r.Members())

	// Put the backup's members back: then it restores to the backup's
	// state, and it persists as the backup, byte for byte.
	var again bytes.Buffer
	_, err = RewriteSnapshot(bytes.NewReader(out.Bytes()), &again, b.fsm.Members())
	require.NoError(t, err)
	back := NewFSM()
	require.NoError(t, back.Restore(bytes.NewReader(again.Bytes())))
	s, err = back.Snapshot()
	require.NoError(t, err)
	require.True(t, bytes.Equal(backup, persist(t, s)), "restored with its own members, the backup persists as it was")

	// No members (a cluster with no member records yet) is none, not the
	// backup's.
	var none bytes.Buffer
	_, err = RewriteSnapshot(bytes.NewReader(backup), &none, nil)
	require.NoError(t, err)
	empty := NewFSM()
	require.NoError(t, empty.Restore(bytes.NewReader(none.Bytes())))
	require.Empty(t, empty.Members())
}

// InspectSnapshot reads the whole stream: every section with its records
// and bytes (which add up to the stream), and a damaged stream is refused
// with Restore's reason.
func TestInspectSnapshot(t *testing.T) {
	t.Parallel()
	b := busyFSM(t, 5)
	s, err := b.fsm.Snapshot()
	require.NoError(t, err)
	snap := persist(t, s)

	info, err := InspectSnapshot(bytes.NewReader(snap))
	require.NoError(t, err)
	require.Equal(t, snapshotFSM(b.fsm.st), info.FSMVersion)
	counts := map[string]int{}
	var total int64
	for _, sec := range info.Sections {
		counts[sec.Name] = sec.Count
		require.Positive(t, sec.Bytes, sec.Name)
		total += sec.Bytes
	}
	require.Equal(t, len(b.fsm.Deliveries(func(*Delivery) bool { return true })), counts["deliveries"])
	require.Equal(t, len(b.fsm.Runs(func(*Run) bool { return true })), counts["runs"])
	header := int64(bytes.IndexByte(snap, '\n') + 1)
	require.Less(t, total, int64(len(snap))-header, "the end section is not counted")
	require.Greater(t, total, int64(len(snap))-header-64)

	_, err = InspectSnapshot(bytes.NewReader(snap[:len(snap)-30]))
	require.ErrorContains(t, err, "read snapshot")
}
