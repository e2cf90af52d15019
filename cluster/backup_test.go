package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// backupOf is a backup file of an engine state holding n tasks.
func backupOf(t *testing.T, n int, edit func(*BackupHeader)) []byte {
	t.Helper()
	f := engine.NewFSM()
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i := range n {
		cmd, err := engine.Encode(engine.CmdSubmitTask, engine.SubmitTask{Key: fmt.Sprint("k", i), Rule: "r", DueAt: at.Add(time.Duration(i) * time.Minute), Now: at})
		require.NoError(t, err)
		f.Apply(uint64(i+1), 1, cmd)
	}
	snap, err := f.Snapshot()
	require.NoError(t, err)
	var state bytes.Buffer
	require.NoError(t, snap.Persist(&state))
	h := BackupHeader{ClusterID: "c1", NodeID: "n2", Index: uint64(n), Term: 1, FSMVersion: engine.FSMVersion,
		Build: engine.Build, Created: at, Size: int64(state.Len())}
	if edit != nil {
		edit(&h)
	}
	var out bytes.Buffer
	require.NoError(t, WriteBackup(&out, h, &state))
	return out.Bytes()
}

func TestBackupRoundTrip(t *testing.T) {
	t.Parallel()
	b := backupOf(t, 50, nil)
	info, err := InspectBackup(bytes.NewReader(b))
	require.NoError(t, err)
	require.Equal(t, "c1", info.Header.ClusterID)
	require.Equal(t, uint64(50), info.Header.Index)
	require.Len(t, info.SHA256, 64)
	counts := map[string]int{}
	for _, s := range info.State.Sections {
		counts[s.Name] = s.Count
	}
	require.Equal(t, 50, counts["tasks"])
	require.True(t, strings.HasPrefix(string(b), "HERALD-BACKUP 1\n{"), "%.40q", b)
}

// Every damaged, truncated or foreign file is refused with ErrBadBackup
// and a reason, by inspect and by the reader a restore spools through.
func TestBackupRefusesBadFiles(t *testing.T) {
	t.Parallel()
	good := backupOf(t, 200, nil)
	headerEnd := bytes.IndexByte(good[len("HERALD-BACKUP 1\n"):], '\n') + len("HERALD-BACKUP 1\n") + 1
	flip := func(at int) []byte {
		b := bytes.Clone(good)
		b[at] ^= 0x20
		return b
	}
	newerFSM := backupOf(t, 3, func(h *BackupHeader) { h.FSMVersion = engine.FSMVersion + 1; h.Build = "v9" })
	cases := map[string]struct {
		file []byte
		why  string
	}{
		"empty":                  {nil, "empty"},
		"wrong magic":            {append([]byte("HERALD-BACKOP 1\n"), good[16:]...), "does not start with"},
		"a raft snapshot":        {good[headerEnd:], "does not start with"},
		"newer envelope":         {append([]byte("HERALD-BACKUP 2\n"), good[16:]...), "envelope version 2"},
		"header only":            {good[:headerEnd], "truncated"},
		"truncated in the state": {good[:headerEnd+1000], "truncated"},
		"no checksum":            {good[:len(good)-78], "checksum"},
		"half a checksum":        {good[:len(good)-30], "truncated in the checksum"},
		"corrupt byte in state":  {flip(headerEnd + len(good[headerEnd:])/2), "checksum does not match"},
		"corrupt byte in header": {flip(len("HERALD-BACKUP 1\n") + 3), "checksum does not match"},
		"corrupt checksum":       {flip(len(good) - 10), "checksum"},
		"bytes after":            {append(bytes.Clone(good), "x"...), "follow the checksum"},
		"two files":              {append(bytes.Clone(good), good...), "follow the checksum"},
		"newer FSM version":      {newerFSM, fmt.Sprintf("FSM version %d; this build", engine.FSMVersion+1)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := InspectBackup(bytes.NewReader(c.file))
			require.ErrorIs(t, err, ErrBadBackup)
			require.ErrorContains(t, err, c.why)

			// The envelope alone (what restore copies before decoding) is
			// refused too, except the FSM version, which restore checks.
			if name == "newer FSM version" {
				return
			}
			_, body, err := OpenBackup(bytes.NewReader(c.file))
			if err == nil {
				_, err = io.Copy(io.Discard, body)
			}
			require.ErrorIs(t, err, ErrBadBackup)
		})
	}
}

// A file whose checksum matches but whose state does not read (written
// by a broken build, or forged) is refused by what it holds.
func TestBackupRefusesAnUnreadableState(t *testing.T) {
	t.Parallel()
	state := []byte(`{"version":2,"applied":1,"fsm_version":2}` + "\nnot gob")
	var b bytes.Buffer
	require.NoError(t, WriteBackup(&b, BackupHeader{FSMVersion: engine.FSMVersion, Size: int64(len(state))}, bytes.NewReader(state)))
	_, err := InspectBackup(&b)
	require.ErrorIs(t, err, ErrBadBackup)
	require.ErrorContains(t, err, "the checksum matches but the state does not read")
}

// A restore's spool that cannot be written is the node's disk, said so,
// and not a bad backup; one that can holds the backup's body under a
// header naming this cluster's members.
func TestSpoolBackupTellsTheDiskFromTheBackup(t *testing.T) {
	t.Parallel()
	b := backupOf(t, 60000, nil) // past the spool's 1 MiB buffer: the disk fills while the backup is read
	require.Greater(t, len(b), 2<<20)
	members := []engine.Member{{ID: "n1", FSMVersion: engine.FSMVersion}}

	_, body, err := OpenBackup(bytes.NewReader(b))
	require.NoError(t, err)
	_, _, err = spoolBackup(body, &fullDisk{room: 4096}, members)
	require.ErrorContains(t, err, "restore: spool file: no space left")
	require.NotErrorIs(t, err, ErrBadBackup)

	_, body, err = OpenBackup(bytes.NewReader(b))
	require.NoError(t, err)
	var spool bytes.Buffer
	state, sum, err := spoolBackup(body, &spool, members)
	require.NoError(t, err)
	info, err := InspectBackup(bytes.NewReader(b))
	require.NoError(t, err)
	require.Equal(t, info.SHA256, sum)
	require.Equal(t, info.State.Sections, state.Sections)
	f := engine.NewFSM()
	require.NoError(t, f.Restore(&spool))
	require.Equal(t, members, f.Members())
}

// fullDisk takes room bytes, then fails as a full disk does.
type fullDisk struct{ room int }

func (d *fullDisk) Write(p []byte) (int, error) {
	if len(p) > d.room {
		n := d.room
		d.room = 0
		return n, errors.New("no space left on device")
	}
	d.room -= len(p)
	return len(p), nil
}

// The header is one line of JSON with the fields inspect shows.
func TestBackupHeaderFields(t *testing.T) {
	t.Parallel()
	b := backupOf(t, 1, nil)
	line := bytes.Split(b, []byte("\n"))[1]
	var m map[string]any
	require.NoError(t, json.Unmarshal(line, &m))
	for _, k := range []string{"cluster_id", "node_id", "index", "term", "fsm_version", "build", "created", "size"} {
		require.Contains(t, m, k)
	}
}
