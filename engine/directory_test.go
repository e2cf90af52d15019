package engine

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func dirBody(ids ...string) SetDirectory {
	slices.Sort(ids)
	body := fmt.Sprintf(`{"source":"test","people":[%q]}`, strings.Join(ids, ","))
	return SetDirectory{Hash: "h-" + strings.Join(ids, "-"), Source: "test", Body: []byte(body), UserIDs: ids, FetchedAt: t0, Now: t0}
}

func TestDirectoryCommands(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	require.Nil(b.t, b.apply(CmdStartRun, StartRun{Key: "r0", Rule: "x", Slot: t0, Now: t0}))
	run, _ := b.fsm.Run("r0")
	require.Empty(t, run.DirectoryHash, "no directory yet")

	first := dirBody("a", "b", "c", "d", "e")
	require.Nil(t, b.apply(CmdSetDirectory, first))
	require.Nil(t, b.apply(CmdStartRun, StartRun{Key: "r1", Rule: "x", Slot: t0, Now: t0}))
	run, _ = b.fsm.Run("r1")
	require.Equal(t, first.Hash, run.DirectoryHash, "Apply stamps the directory in force on the run")

	require.ErrorIs(t, b.apply(CmdConfirmDirectory, ConfirmDirectory{By: "op", Now: t0}).(error), ErrNoHeldDirectory)
	smaller := dirBody("a", "b")
	hold := HoldDirectory{Hash: smaller.Hash, Source: "test", Body: smaller.Body, UserIDs: smaller.UserIDs,
		Removed: []string{"c", "d", "e"}, FetchedAt: t0, Now: t0.Add(time.Minute)}
	require.Nil(t, b.apply(CmdHoldDirectory, hold))
	require.Nil(t, b.apply(CmdHoldDirectory, hold), "the same hold again changes nothing")
	cur, held := b.fsm.Directory()
	require.Equal(t, first.Hash, cur.Hash, "a hold leaves the snapshot in force")
	require.Equal(t, smaller.Hash, held.Hash)
	al, ok := b.fsm.Alert(AlertID(AlertDirectoryHeld))
	require.True(t, ok)
	require.Equal(t, 1, al.Count)
	require.Contains(t, al.Message, "would remove 3 of 5 people")
	require.Contains(t, al.Message, "herald directory confirm "+smaller.Hash)

	require.ErrorIs(t, b.apply(CmdConfirmDirectory, ConfirmDirectory{Hash: "other", By: "op", Now: t0}).(error), ErrHeldDirectoryMismatch)

	// A snapshot round trip keeps both.
	snap, err := b.fsm.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, snap.Persist(&buf))
	restored := NewFSM()
	require.NoError(t, restored.Restore(bytes.NewReader(buf.Bytes())))
	rc, rh := restored.Directory()
	require.Equal(t, cur, rc)
	require.Equal(t, held, rh)

	res := b.apply(CmdConfirmDirectory, ConfirmDirectory{Hash: smaller.Hash, By: "op", Now: t0.Add(2 * time.Minute)})
	require.IsType(t, &DirectoryRecord{}, res)
	cur, held = b.fsm.Directory()
	require.Nil(t, held)
	require.Equal(t, smaller.Hash, cur.Hash)
	require.Equal(t, "op", cur.ConfirmedBy)
	require.Empty(t, cur.Removed)

	// A newer refresh supersedes a hold.
	require.Nil(t, b.apply(CmdHoldDirectory, HoldDirectory{Hash: "h-none", Source: "test", Body: []byte(`{}`), Removed: []string{"a", "b"}, Now: t0}))
	require.Nil(t, b.apply(CmdSetDirectory, dirBody("a", "b", "f")))
	cur, held = b.fsm.Directory()
	require.Nil(t, held)
	require.Equal(t, []string{"a", "b", "f"}, cur.UserIDs)
}

func TestSnapshotWithoutDirectoryHasNoSection(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	snap, err := b.fsm.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, snap.Persist(&buf))
	require.NotContains(t, buf.String(), "directory", "a cluster without a directory writes what older builds read")
}
