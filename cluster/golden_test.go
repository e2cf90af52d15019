package cluster

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// goldenDir is a data dir written by the build of commit 9f8fda9 (see its
// README): a snapshot and log entries after it. Every later build must open
// it, restore the snapshot, replay the log to the same state, and go on.
const goldenDir = "testdata/golden-9f8fda9"

// goldenSnapshotIndex is the index of the golden dir's snapshot.
const goldenSnapshotIndex = 55

// goldenState is what the state machine holds, in the shape the old
// build's TestDumpGolden wrote it to state.json.
func goldenState(fsm *engine.FSM) map[string]any {
	tasks, _ := fsm.ListTasks(engine.TaskFilter{})
	cursors := map[string]time.Time{}
	missed := map[string]map[string][]string{}
	for _, r := range []string{"tick", "remind", "ops_alert"} {
		if c, ok := fsm.Cursor(r); ok {
			cursors[r] = c
		}
		missed[r] = fsm.Missed(r)
	}
	pending, open := fsm.Counts()
	return map[string]any{
		"applied_index": fsm.AppliedIndex(),
		"runs":          fsm.Runs(nil),
		"deliveries":    fsm.Deliveries(nil),
		"tasks":         tasks,
		"alerts":        fsm.Alerts(),
		"members":       fsm.Members(),
		"cursors":       cursors,
		"missed":        missed,
		"daily":         fsm.AllDayStats(),
		"counts":        map[string]int{"pending_tasks": pending, "open_alerts": open},
	}
}

// asJSON turns v into its generic JSON form (maps, slices, strings, numbers).
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// requireSubset fails unless got holds everything want holds: the same
// array lengths, and every object key of want with the same value. Keys
// that only got has are fields added since the golden data was written;
// their values for old data are what later builds chose.
func requireSubset(t *testing.T, path string, want, got any) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		require.True(t, ok, "%s: want an object, got %v", path, got)
		for k, wv := range w {
			gv, ok := g[k]
			require.True(t, ok, "%s.%s: missing (want %v)", path, k, wv)
			requireSubset(t, path+"."+k, wv, gv)
		}
	case []any:
		g, ok := got.([]any)
		require.True(t, ok, "%s: want an array, got %v", path, got)
		require.Len(t, g, len(w), "%s: want %d elements, got %d", path, len(w), len(g))
		for i := range w {
			requireSubset(t, fmt.Sprintf("%s[%d]", path, i), w[i], g[i])
		}
	default:
		require.True(t, reflect.DeepEqual(want, got), "%s: want %v, got %v", path, want, got)
	}
}

// goldenConfig is the golden node's config on a free Raft port: its old
// address is in the Raft configuration, and a lone voter elects itself by
// id whatever its address.
func goldenConfig(t *testing.T, dir string) Config {
	t.Helper()
	ln, err := net.Listen("tcp", loopbackAddr(t))
	require.NoError(t, err)
	return DevConfig(Config{NodeID: "n1", DataDir: dir, RaftListener: ln, HTTPAddr: "127.0.0.1:1", Logger: testLogger()})
}

// openGolden opens the data dir at dir with this build and waits until it
// leads and has applied everything in its log.
func openGolden(t *testing.T, dir string) (*Node, *engine.FSM) {
	t.Helper()
	fsm := engine.NewFSM()
	n, err := New(goldenConfig(t, dir), fsm)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Shutdown() })
	require.NoError(t, n.Start(ctxT(t)))
	require.Eventually(t, n.IsLeader, waitTimeout, 10*time.Millisecond, "the golden node did not lead")
	require.NoError(t, n.raft.Barrier(waitTimeout).Error())
	return n, fsm
}

// TestGoldenDataDirOpensAndContinues: a data dir written by an older build
// (snapshot plus later log entries) is read by this build to the very state
// the older build had, and takes new commands on top.
func TestGoldenDataDirOpensAndContinues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join(goldenDir, "n1"))))
	want, err := os.ReadFile(filepath.Join(goldenDir, "state.json"))
	require.NoError(t, err)
	var wantState any
	require.NoError(t, json.Unmarshal(want, &wantState))

	fsm := engine.NewFSM()
	n, err := New(goldenConfig(t, dir), fsm)
	require.NoError(t, err)
	// New restored the old build's snapshot before any log replay.
	require.Equal(t, uint64(goldenSnapshotIndex), fsm.AppliedIndex(), "the snapshot was not restored")
	require.NotEmpty(t, fsm.Runs(nil), "the snapshot holds runs")
	require.NoError(t, n.Start(ctxT(t)))
	require.Eventually(t, n.IsLeader, waitTimeout, 10*time.Millisecond, "the golden node did not lead")
	require.NoError(t, n.raft.Barrier(waitTimeout).Error())

	// The log after the snapshot replayed to the old build's state.
	requireSubset(t, "state", wantState, asJSON(t, goldenState(fsm)))
	t.Logf("golden 9f8fda9: snapshot at %d, replayed to %d: %d runs, %d deliveries, %d alerts restored",
		goldenSnapshotIndex, fsm.AppliedIndex(), len(fsm.Runs(nil)), len(fsm.Deliveries(nil)), len(fsm.Alerts()))

	// New commands on top of the old state.
	ctx := ctxT(t)
	apply := func(typ engine.CommandType, body any) (any, error) {
		t.Helper()
		cmd, err := engine.Encode(typ, body)
		require.NoError(t, err)
		return n.Apply(ctx, cmd)
	}
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

	// The run the old build sent and pruned stays fired (the ledger); a
	// slot it kept is refused as a duplicate; a new slot starts.
	_, ok := fsm.Run(engine.TaskRunKey("t-sent"))
	require.False(t, ok, "t-sent's run was pruned")
	_, err = apply(engine.CmdStartRun, engine.StartRun{Key: engine.TaskRunKey("t-sent"), Rule: "remind", TaskKey: "t-sent", Slot: now, Now: now})
	require.ErrorIs(t, err, engine.ErrRunExists)
	kept := fsm.Runs(func(r *engine.Run) bool { return r.Rule == "tick" })[0]
	_, err = apply(engine.CmdStartRun, engine.StartRun{Key: kept.Key, Rule: "tick", Slot: kept.Slot, Now: now})
	require.ErrorIs(t, err, engine.ErrRunExists)
	slot := now.Truncate(time.Second)
	_, err = apply(engine.CmdStartRun, engine.StartRun{Key: engine.RunKey("tick", slot), Rule: "tick", Slot: slot, Now: now})
	require.NoError(t, err)
	cursor, ok := fsm.Cursor("tick")
	require.True(t, ok)
	require.True(t, cursor.Equal(slot), "the new slot moves the cursor")

	// Tasks: the pruned t-sent's key stays used; the pending one is
	// cancelled; a new one is taken.
	_, err = apply(engine.CmdSubmitTask, engine.SubmitTask{Key: "t-sent", Rule: "remind", DueAt: now, Data: json.RawMessage(`{"to":["alice"],"note":"sent"}`), Now: now})
	require.ErrorIs(t, err, engine.ErrTaskKeyUsed)
	_, err = apply(engine.CmdCancelTask, engine.CancelTask{Key: "t-pending", Now: now})
	require.NoError(t, err)
	_, err = apply(engine.CmdSubmitTask, engine.SubmitTask{Key: "t-new", Rule: "remind", DueAt: now.Add(time.Hour), Data: json.RawMessage(`{"to":["bob"]}`), Now: now})
	require.NoError(t, err)
	pendingTask, ok := fsm.Task("t-pending")
	require.True(t, ok)
	require.Equal(t, engine.TaskCancelled, pendingTask.State)

	// The open alert is acknowledged.
	for _, a := range fsm.Alerts() {
		if !a.Acked {
			_, err = apply(engine.CmdAckAlert, engine.AckAlert{ID: a.ID})
			require.NoError(t, err)
		}
	}
	pending, open := fsm.Counts()
	require.Equal(t, 1, pending, "t-new")
	require.Zero(t, open)

	// This build's own snapshot of the continued state reads back to it.
	after := asJSON(t, goldenState(fsm))
	require.NoError(t, n.raft.Snapshot().Error())
	require.NoError(t, n.Shutdown())
	_, again := openGolden(t, dir)
	require.Equal(t, after, asJSON(t, goldenState(again)))
}
