package engine

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Restore of the bytes StageRestore wrote installs the state it read,
// not a second reading of them, and that state is the one a reading
// gives. Any other snapshot is read as ever and lets the staged state go.
func TestStagedRestoreInstallsTheStateRead(t *testing.T) {
	t.Parallel()
	backup := func(rounds int) []byte {
		b := busyFSM(t, rounds)
		for i := range 50 {
			b.apply(CmdSubmitTask, SubmitTask{Key: string(rune('a'+i%26)) + "-task", Rule: "r", DueAt: t0, Now: t0})
		}
		s, err := b.fsm.Snapshot()
		require.NoError(t, err)
		return persist(t, s)
	}
	members := []Member{{ID: "n1", RaftAddr: "127.0.0.1:9001", FSMVersion: FSMVersion}}
	in := backup(8)
	var plain bytes.Buffer
	_, err := RewriteSnapshot(bytes.NewReader(in), &plain, members)
	require.NoError(t, err)
	read := NewFSM()
	require.NoError(t, read.Restore(bytes.NewReader(plain.Bytes())))

	f := busyFSM(t, 2).fsm
	var out bytes.Buffer
	info, err := f.StageRestore(bytes.NewReader(in), &out, members)
	require.NoError(t, err)
	require.Positive(t, info.Applied)
	staged := f.staged.st
	require.NotEqual(t, plain.String(), out.String(), "a staged snapshot names itself")
	require.NoError(t, f.Restore(bytes.NewReader(out.Bytes())))
	require.Same(t, staged, f.st, "the staged state, not a second reading")
	require.Nil(t, f.staged)
	require.Equal(t, read.AppliedIndex(), f.AppliedIndex())
	require.Equal(t, string(persistV1(t, read)), string(persistV1(t, f)))
	require.Equal(t, read.Members(), f.Members())

	// Another snapshot after a staging: read, and the staged state gone.
	other := backup(3)
	_, err = f.StageRestore(bytes.NewReader(in), &out, members)
	require.NoError(t, err)
	require.NoError(t, f.Restore(bytes.NewReader(other)))
	require.Nil(t, f.staged)
	again := NewFSM()
	require.NoError(t, again.Restore(bytes.NewReader(other)))
	require.Equal(t, string(persistV1(t, again)), string(persistV1(t, f)))

	// Unstage lets it go; the bytes written then read as any snapshot.
	out.Reset()
	_, err = f.StageRestore(bytes.NewReader(in), &out, members)
	require.NoError(t, err)
	f.Unstage()
	require.Nil(t, f.staged)
	require.NoError(t, f.Restore(bytes.NewReader(out.Bytes())))
	require.NotSame(t, staged, f.st)
	require.Equal(t, string(persistV1(t, read)), string(persistV1(t, f)))

	// A backup that does not read stages nothing.
	_, err = f.StageRestore(bytes.NewReader(in[:len(in)/2]), &out, members)
	require.Error(t, err)
	require.Nil(t, f.staged)
}

// The staged snapshot's bytes changed on their way (a byte flipped after
// the header) stop a node that held a state, as a body that does not
// read does: it has nothing it can install.
func TestStagedRestoreOfOtherBytesStops(t *testing.T) {
	t.Parallel()
	s, err := busyFSM(t, 4).fsm.Snapshot()
	require.NoError(t, err)
	in := persist(t, s)
	f := busyFSM(t, 2).fsm
	var halted error
	f.SetHalt(func(err error) { halted = err; panic(haltedRestore{}) })
	var out bytes.Buffer
	_, err = f.StageRestore(bytes.NewReader(in), &out, nil)
	require.NoError(t, err)
	flipped := out.Bytes()
	flipped[len(flipped)-3] ^= 0x20
	require.Error(t, restoreRecovering(f, flipped))
	var re *RestoreError
	require.True(t, errors.As(halted, &re), "%v", halted)
	require.Zero(t, f.AppliedIndex())
}
