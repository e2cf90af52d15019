package engine

import (
	"bufio"
	"bytes"
	"encoding/gob"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// While a member still runs a build of FSM version 1, nothing of version 2
// is in the state (the leader admits no such command), and a snapshot the
// leader sends that member (a follower too far behind for the log) must
// hold only the sections that build reads: it refuses an unknown section,
// even an empty one, and would stay behind until it is upgraded.
func TestSnapshotOfVersion1StateHasOnlyVersion1Sections(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.planned("daily_report", "alice", "bob")
	require.Nil(t, b.apply(CmdUpsertMember, Member{ID: "n1", RaftAddr: "127.0.0.1:7101", HTTPAddr: "127.0.0.1:8101"}))

	snap, err := b.fsm.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, snap.Persist(&buf))
	br := bufio.NewReader(&buf)
	_, err = br.ReadBytes('\n') // the header
	require.NoError(t, err)
	dec := gob.NewDecoder(br)
	st := newState()
	st.payloads = map[string]json.RawMessage{} // as readVersion2 does
	for {
		var sec section
		require.NoError(t, dec.Decode(&sec))
		if sec.Name == sectionEnd {
			break
		}
		require.Contains(t, requiredSections, sec.Name, "a build of FSM version 1 cannot read section %q", sec.Name)
		for range sec.Count {
			require.NoError(t, sectionReaders[sec.Name](dec, st))
		}
	}
}
