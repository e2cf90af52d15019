package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/btree"
	"github.com/stretchr/testify/require"
)

// packedTasksFSM is an FSM of a cluster at member FSM version memberFSM
// holding n tasks of three rules, due in four zones, with no data, a
// little and a lot (so that blocks end both by count and by bytes); every
// seventh cancelled and every eleventh fired.
func packedTasksFSM(t *testing.T, n int, memberFSM uint16) *fsmBundle {
	b := setupFSM(t)
	b.apply(CmdUpsertMember, Member{ID: "n1", FSMVersion: FSMVersion})
	b.apply(CmdUpsertMember, Member{ID: "n2", FSMVersion: memberFSM})
	zones := []*time.Location{time.UTC, time.FixedZone("", 8*3600), time.FixedZone("", -5*3600), time.Local}
	for i := range n {
		var data json.RawMessage
		switch i % 3 {
		case 1:
			data = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
		case 2:
			data = json.RawMessage(`"` + strings.Repeat("x", 500) + `"`)
		}
		key := fmt.Sprintf("task-%06d", i)
		due := t0.Add(time.Duration(i%97) * time.Minute).In(zones[i%len(zones)])
		res := b.apply(CmdSubmitTask, SubmitTask{Key: key, Rule: fmt.Sprint("rule-", i%3), DueAt: due, Data: data, Now: t0.Add(time.Duration(i) * time.Millisecond)})
		require.True(t, res.(SubmitResult).Created, "%v", res)
		switch {
		case i%7 == 0:
			b.apply(CmdCancelTask, CancelTask{Key: key, Now: t0})
		case i%11 == 0:
			b.apply(CmdStartRun, StartRun{Key: TaskRunKey(key), Rule: "rule-0", Slot: due, TaskKey: key, Now: due})
		}
	}
	return b
}

// sectionsOf reads a snapshot's header and its sections' counts, and
// says whether it has the section tasks_packed (reported as part of
// tasks).
func sectionsOf(t *testing.T, snap []byte) (snapshotHeader, map[string]int, bool) {
	t.Helper()
	var h snapshotHeader
	require.NoError(t, json.Unmarshal(snap[:bytes.IndexByte(snap, '\n')], &h))
	info, err := InspectSnapshot(bytes.NewReader(snap))
	require.NoError(t, err)
	counts := map[string]int{}
	for _, s := range info.Sections {
		counts[s.Name] = s.Count
	}
	return h, counts, bytes.Contains(snap, []byte("tasks_packed"))
}

// A cluster whose members all apply FSMPackedTasks writes its pending
// tasks to tasks_packed, in blocks, and a snapshot of it restores to the
// same tasks and writes back out to the same bytes. One with a member on
// an older build writes them as before, to tasks, which that build reads.
func TestPackedTasksRoundTrip(t *testing.T) {
	t.Parallel()
	const n = 12000 // blocks of 4096 tasks, and of 1 MiB of bytes
	for _, memberFSM := range []uint16{FSMPackedTasks, FSMPackedTasks - 1} {
		t.Run(fmt.Sprint("member on ", memberFSM), func(t *testing.T) {
			t.Parallel()
			b := packedTasksFSM(t, n, memberFSM)
			s, err := b.fsm.Snapshot()
			require.NoError(t, err)
			snap := persist(t, s)
			h, counts, packed := sectionsOf(t, snap)
			require.Equal(t, n, counts["tasks"])
			require.Equal(t, memberFSM >= FSMPackedTasks, packed)
			if packed {
				require.Equal(t, FSMPackedTasks, h.FSMVersion)
			} else {
				require.Less(t, h.FSMVersion, FSMPackedTasks)
			}
			pending, _ := b.fsm.ListTasks(TaskFilter{State: TaskPending, Limit: n})
			require.Greater(t, len(pending), 2*taskBlockTasks)

			r := NewFSM()
			require.NoError(t, r.Restore(bytes.NewReader(snap)))
			again, err := r.Snapshot()
			require.NoError(t, err)
			require.Equal(t, string(snap), string(persist(t, again)))
			for _, st := range []TaskState{0, TaskPending, TaskFired, TaskCancelled} {
				want, _ := b.fsm.ListTasks(TaskFilter{State: st, Limit: n})
				got, _ := r.ListTasks(TaskFilter{State: st, Limit: n})
				require.Equal(t, want, got, "%s tasks", st)
				for i := range want { // instants with their zone, not only Equal
					require.True(t, want[i].DueAt == got[i].DueAt && want[i].SubmittedAt == got[i].SubmittedAt, want[i].Key)
				}
			}
			now := t0.Add(2 * time.Hour)
			require.Equal(t, b.fsm.DueTasks(now, n), r.DueTasks(now, n))
			requireTasksIndexed(t, r.st)
		})
	}
}

// A cluster on FSMPackedTasks with no pending task writes the snapshot it
// wrote before: no tasks_packed, and the FSM version the rest needs.
func TestNoPackedTasksWithoutPendingTasks(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.apply(CmdUpsertMember, Member{ID: "n1", FSMVersion: FSMVersion})
	b.apply(CmdSubmitTask, SubmitTask{Key: "k", Rule: "r", DueAt: t0, Now: t0})
	b.apply(CmdCancelTask, CancelTask{Key: "k", Now: t0})
	s, err := b.fsm.Snapshot()
	require.NoError(t, err)
	h, counts, packed := sectionsOf(t, persist(t, s))
	require.Less(t, h.FSMVersion, FSMPackedTasks)
	require.False(t, packed)
	require.Equal(t, 1, counts["tasks"])
}

// requireTasksIndexed checks that st's task indexes, as a restore's
// reading filled them, are those indexTasks makes from its tasks.
func requireTasksIndexed(t *testing.T, st *state) {
	t.Helper()
	items := func() [2][]dueItem {
		var out [2][]dueItem
		for i, tree := range []*btree.BTreeG[dueItem]{st.taskQueue, st.taskDone} {
			tree.Ascend(func(it dueItem) bool { out[i] = append(out[i], it); return true })
		}
		return out
	}
	read := items()
	st.indexTasks()
	require.Equal(t, items(), read)
}

// A task key read twice, in tasks_packed and then in tasks (no snapshot
// Herald wrote has one; Restore takes the last, as it always did), leaves
// the indexes holding that record's entry alone.
func TestRestoreIndexesATaskReadTwiceOnce(t *testing.T) {
	t.Parallel()
	var h []byte
	for _, u := range []uint64{1, 2, 0} {
		h = binary.AppendUvarint(h, u)
	}
	for _, v := range []int64{t0.UnixNano(), zoneUTC, t0.UnixNano(), zoneUTC} {
		h = binary.AppendVarint(h, v)
	}
	fired := Task{Key: "k", Rule: "r", DueAt: t0.Add(time.Hour), State: TaskFired, FiredAt: t0.Add(time.Hour), SubmittedAt: t0}
	var buf bytes.Buffer
	buf.WriteString(`{"version":2,"applied":9,"fsm_version":6}` + "\n")
	enc := gob.NewEncoder(&buf)
	for _, name := range requiredSections {
		switch name {
		case "tasks":
			require.NoError(t, enc.Encode(section{Name: "tasks_packed", Count: 1}))
			require.NoError(t, enc.Encode(&taskBlock{Rules: []string{"r"}, Heads: h, Bytes: []byte("k{}")}))
			require.NoError(t, enc.Encode(section{Name: "tasks", Count: 1}))
			require.NoError(t, enc.Encode(&fired))
		default:
			require.NoError(t, enc.Encode(section{Name: name}))
		}
	}
	require.NoError(t, enc.Encode(section{Name: sectionEnd}))

	r := NewFSM()
	require.NoError(t, r.Restore(bytes.NewReader(buf.Bytes())))
	require.Equal(t, 1, r.st.Tasks.Len())
	require.Zero(t, r.st.taskQueue.Len(), "the pending entry read first is gone")
	require.Empty(t, r.DueTasks(t0.Add(2*time.Hour), 10))
	requireTasksIndexed(t, r.st)
	got, _ := r.ListTasks(TaskFilter{Limit: 10})
	require.Len(t, got, 1)
	require.Equal(t, TaskFired, got[0].State)
}

// A damaged tasks_packed section is refused with a reason, and never
// panics.
func TestRestoreRefusesBadTaskBlocks(t *testing.T) {
	t.Parallel()
	head := func(keyLen, dataLen, rule uint64, zone int64) []byte {
		var h []byte
		for _, u := range []uint64{keyLen, dataLen, rule} {
			h = binary.AppendUvarint(h, u)
		}
		for _, v := range []int64{1, zone, 2, 0} {
			h = binary.AppendVarint(h, v)
		}
		return h
	}
	good := taskBlock{Rules: []string{"r"}, Heads: head(1, 2, 0, 0), Bytes: []byte("k{}")}
	snapshotOf := func(count int, blocks ...taskBlock) []byte {
		var buf bytes.Buffer
		buf.WriteString(`{"version":2,"applied":9,"fsm_version":6}` + "\n")
		enc := gob.NewEncoder(&buf)
		for _, name := range requiredSections {
			if name == "tasks" {
				require.NoError(t, enc.Encode(section{Name: "tasks_packed", Count: count}))
				for i := range blocks {
					require.NoError(t, enc.Encode(&blocks[i]))
				}
			}
			require.NoError(t, enc.Encode(section{Name: name}))
		}
		require.NoError(t, enc.Encode(section{Name: sectionEnd}))
		return buf.Bytes()
	}
	r := NewFSM()
	require.NoError(t, r.Restore(bytes.NewReader(snapshotOf(2, good, good))), "a block of one task, twice (the same key)")
	pending, _ := r.Counts()
	require.Equal(t, 1, pending)

	bad := map[string][]byte{
		"more tasks than counted":  snapshotOf(1, taskBlock{Rules: []string{"r"}, Heads: append(head(1, 2, 0, 0), head(1, 2, 0, 0)...), Bytes: []byte("k{}j{}")}),
		"fewer tasks than counted": snapshotOf(3, good, good),
		"an empty block":           snapshotOf(1, taskBlock{Rules: []string{"r"}}),
		"no such rule":             snapshotOf(1, taskBlock{Rules: []string{"r"}, Heads: head(1, 0, 1, 0), Bytes: []byte("k")}),
		"past the bytes":           snapshotOf(1, taskBlock{Rules: []string{"r"}, Heads: head(1, 5, 0, 0), Bytes: []byte("k{}")}),
		"bytes left over":          snapshotOf(1, taskBlock{Rules: []string{"r"}, Heads: head(1, 0, 0, 0), Bytes: []byte("k{}")}),
		"a zone past int32":        snapshotOf(1, taskBlock{Rules: []string{"r"}, Heads: head(1, 0, 0, 1<<40), Bytes: []byte("k")}),
		"a head cut short":         snapshotOf(1, taskBlock{Rules: []string{"r"}, Heads: head(1, 0, 0, 0)[:4], Bytes: []byte("k")}),
		"a length past int32":      snapshotOf(1, taskBlock{Rules: []string{"r"}, Heads: head(1<<33, 0, 0, 0), Bytes: []byte("k")}),
	}
	for name, in := range bad {
		fresh := NewFSM()
		err := restoreRecovering(fresh, in)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "tasks_packed", name)
		require.NotContains(t, err.Error(), "panic", name)
		pending, _ := fresh.Counts()
		require.Zero(t, pending, name)
		// A check, which reads the tasks without keeping them, refuses
		// what Restore refuses, for the same reason.
		_, ierr := InspectSnapshot(bytes.NewReader(in))
		require.EqualError(t, ierr, err.Error(), name)
		_, rerr := RewriteSnapshot(bytes.NewReader(in), io.Discard, nil)
		require.EqualError(t, rerr, err.Error(), name)
	}
}
