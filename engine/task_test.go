package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
)

func TestSubmitTaskIdempotentByKey(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	c := SubmitTask{Key: "enq-1", Rule: "enquiry_timeout", DueAt: t0.Add(15 * time.Minute), Data: json.RawMessage(`{"a":1}`), Now: t0}
	require.True(t, b.apply(CmdSubmitTask, c).(SubmitResult).Created)
	again := c
	again.Now = t0.Add(time.Minute)
	res := b.apply(CmdSubmitTask, again).(SubmitResult)
	require.False(t, res.Created)
	require.Equal(t, t0, res.Task.SubmittedAt)

	other := c
	other.DueAt, other.Data = t0.Add(30*time.Minute), json.RawMessage(`{"a":2}`)
	err := b.apply(CmdSubmitTask, other).(error)
	require.ErrorIs(t, err, ErrTaskConflict)
	var ce *TaskConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []string{"due_at", "data"}, []string{ce.Differences[0].Field, ce.Differences[1].Field})
	require.Equal(t, `{"a":1}`, ce.Differences[1].Existing)

	due := b.fsm.DueTasks(t0.Add(15*time.Minute), 10)
	require.Len(t, due, 1)
	require.Empty(t, b.fsm.DueTasks(t0.Add(time.Minute), 10))
	at, ok := b.fsm.NextTaskDue()
	require.True(t, ok)
	require.Equal(t, t0.Add(15*time.Minute), at)
}

func TestTaskFiresOnceAndCancelRules(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.apply(CmdSubmitTask, SubmitTask{Key: "k", Rule: "r", DueAt: t0, Now: t0})
	start := StartRun{Key: TaskRunKey("k"), Rule: "r", Slot: t0, TaskKey: "k", Now: t0}
	require.Nil(t, b.apply(CmdStartRun, start))
	require.ErrorIs(t, b.apply(CmdStartRun, start).(error), ErrRunExists)
	tk, _ := b.fsm.Task("k")
	require.Equal(t, TaskFired, tk.State)
	_, ok := b.fsm.NextTaskDue()
	require.False(t, ok, "a fired task leaves the due queue")

	// Fired but nothing planned or attempted yet: still cancellable, and
	// the plan that comes later adds nothing.
	res := b.apply(CmdCancelTask, CancelTask{Key: "k", Now: t0}).(CancelResult)
	require.Equal(t, TaskCancelled, res.Task.State)
	require.Equal(t, 0, b.apply(CmdAddDeliveries, AddDeliveries{RunKey: TaskRunKey("k"), Deliveries: []NewDelivery{{ID: "d1", Recipient: "a"}}}))
	require.ErrorIs(t, b.apply(CmdCancelTask, CancelTask{Key: "nope", Now: t0}).(error), ErrNoTask)

	// A pending task cancelled cannot fire.
	b.apply(CmdSubmitTask, SubmitTask{Key: "k2", Rule: "r", DueAt: t0, Now: t0})
	b.apply(CmdCancelTask, CancelTask{Key: "k2", Now: t0})
	require.Error(t, b.apply(CmdStartRun, StartRun{Key: TaskRunKey("k2"), Rule: "r", Slot: t0, TaskKey: "k2", Now: t0}).(error))
}

func TestListTasksPages(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	for i, k := range []string{"a", "b", "c", "d", "e"} {
		b.apply(CmdSubmitTask, SubmitTask{Key: k, Rule: "r", DueAt: t0.Add(time.Duration(i%3) * time.Minute), Now: t0})
	}
	b.apply(CmdCancelTask, CancelTask{Key: "c", Now: t0})
	var keys []string
	flt := TaskFilter{Limit: 2}
	for {
		page, more := b.fsm.ListTasks(flt)
		for _, tk := range page {
			keys = append(keys, tk.Key)
		}
		if !more {
			break
		}
		last := page[len(page)-1]
		flt.AfterDue, flt.AfterKey = last.DueAt, last.Key
	}
	require.Equal(t, []string{"a", "d", "b", "e", "c"}, keys)
	pending, _ := b.fsm.ListTasks(TaskFilter{State: TaskPending, From: t0.Add(time.Minute)})
	require.Len(t, pending, 2) // b, e (c is cancelled)
	cancelled, _ := b.fsm.ListTasks(TaskFilter{State: TaskCancelled})
	require.Len(t, cancelled, 1)
}

func TestNotifyAlertOncePerInterval(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.apply(CmdRaiseAlert, RaiseAlert{Cause: "c", Message: "m", Now: t0})
	id := AlertID("c")
	n := NotifyAlert{ID: id, Seq: 1, Interval: time.Hour, Rule: "ops_alert", Data: []byte(`{}`), Now: t0}
	require.IsType(t, &Task{}, b.apply(CmdNotifyAlert, n))
	require.ErrorIs(t, b.apply(CmdNotifyAlert, n).(error), ErrAlertNotDue, "the same notification twice (two leaders)")
	n.Seq, n.Now = 2, t0.Add(2*time.Hour)
	require.ErrorIs(t, b.apply(CmdNotifyAlert, n).(error), ErrAlertNotDue, "nothing new since")
	b.apply(CmdRaiseAlert, RaiseAlert{Cause: "c", Message: "m", Now: t0.Add(10 * time.Minute)})
	n.Now = t0.Add(30 * time.Minute)
	require.ErrorIs(t, b.apply(CmdNotifyAlert, n).(error), ErrAlertNotDue, "within the interval")
	n.Now = t0.Add(time.Hour)
	require.IsType(t, &Task{}, b.apply(CmdNotifyAlert, n))
	al, _ := b.fsm.Alert(id)
	require.Equal(t, 2, al.Notified)
	_, ok := b.fsm.Task(AlertTaskKey(id, 2))
	require.True(t, ok)
}

func TestPruneKeepsLedgerAndAggregates(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	key := b.planned("daily", "alice", "bob")
	c := b.claim("n1", t0, DeliveryID(key, "alice"), DeliveryID(key, "bob"))
	b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: t0.Add(3 * time.Second), Results: []Settlement{
		{ID: c[0].ID, Seq: c[0].Seq, Status: heraldtype.StatusSent}, {ID: c[1].ID, Seq: c[1].Seq, Status: heraldtype.StatusSent}}})
	b.apply(CmdSubmitTask, SubmitTask{Key: "k", Rule: "r", DueAt: t0, Now: t0})
	b.apply(CmdCancelTask, CancelTask{Key: "k", Now: t0})

	later := t0.Add(8 * 24 * time.Hour)
	res := b.apply(CmdPrune, Prune{Before: later.Add(-7 * 24 * time.Hour), LedgerBefore: later.Add(-90 * 24 * time.Hour), Now: later}).(PruneResult)
	require.Equal(t, PruneResult{Deliveries: 2, Runs: 1, Tasks: 1}, res)
	_, ok := b.fsm.Run(key)
	require.False(t, ok)
	// The slot cannot fire again, and the day's numbers are still there.
	require.ErrorIs(t, b.apply(CmdStartRun, StartRun{Key: key, Rule: "daily", Slot: t0, Now: later}).(error), ErrRunExists)
	st := b.fsm.DayStats(t0.Format(time.DateOnly))["daily"]
	require.Equal(t, 2, st.Sent)
	require.Equal(t, 0, st.Pending())
	require.Equal(t, 3*time.Second, st.SlotToSentSum/2)

	// Past the ledger's retention, the key is forgotten too.
	muchLater := t0.Add(100 * 24 * time.Hour)
	res = b.apply(CmdPrune, Prune{Before: muchLater, LedgerBefore: muchLater.Add(-90 * 24 * time.Hour), Now: muchLater}).(PruneResult)
	require.Equal(t, 1, res.Ledger)
}

func TestSnapshotKeepsTasksAndAggregates(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.planned("daily", "alice")
	b.apply(CmdSubmitTask, SubmitTask{Key: "k", Rule: "r", DueAt: t0.Add(time.Hour), Now: t0})
	snap, err := b.fsm.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, snap.Persist(&buf))
	r := NewFSM()
	tasksChanged, unsubscribe := r.Subscribe(TasksChange)
	defer unsubscribe()
	require.NoError(t, r.Restore(&buf))
	at, ok := r.NextTaskDue()
	require.True(t, ok)
	require.Equal(t, t0.Add(time.Hour), at)
	require.Equal(t, b.fsm.DayStats(t0.Format(time.DateOnly)), r.DayStats(t0.Format(time.DateOnly)))
	select {
	case <-tasksChanged:
	default:
		t.Fatal("a restore must wake the scheduler")
	}
}

func TestQuantile(t *testing.T) {
	t.Parallel()
	h := make([]uint64, len(LatencyBuckets)+1)
	h[0] = 95 // ≤ 1s
	h[1] = 5  // ≤ 5s
	require.Equal(t, time.Second, Quantile(h, 0.95))
	require.Greater(t, Quantile(h, 0.99), time.Second)
	require.Equal(t, time.Duration(0), Quantile(make([]uint64, 3), 0.95))
}

// Too late to cancel: the answer counts every delivery of the task's run by
// state, not only those before the first one that was attempted.
func TestCancelTooLateCountsEveryDelivery(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.apply(CmdSubmitTask, SubmitTask{Key: "k", Rule: "r", DueAt: t0, Now: t0})
	key := TaskRunKey("k")
	require.Nil(t, b.apply(CmdStartRun, StartRun{Key: key, Rule: "r", Slot: t0, TaskKey: "k", Now: t0}))
	var nds []NewDelivery
	for _, who := range []string{"alice", "bob", "carol"} {
		nds = append(nds, NewDelivery{ID: DeliveryID(key, who), Recipient: who, Channel: "mock", Priority: heraldtype.PriorityNormal, NotBefore: t0, Deadline: t0.Add(time.Hour)})
	}
	require.Equal(t, 3, b.apply(CmdAddDeliveries, AddDeliveries{RunKey: key, Deliveries: nds}))
	c := b.claim("n1", t0, DeliveryID(key, "alice"))
	b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: t0, Results: []Settlement{{ID: c[0].ID, Seq: c[0].Seq, Status: heraldtype.StatusSent}}})

	err, _ := b.apply(CmdCancelTask, CancelTask{Key: "k", Now: t0}).(error)
	var fired *TaskFiredError
	require.ErrorAs(t, err, &fired)
	require.Equal(t, map[string]int{"sent": 1, "pending": 2}, fired.States)
	require.Contains(t, err.Error(), "deliveries 2 pending, 1 sent")
}

// The ledger keeps a pruned run's key for its retention after the run
// fired, also when its slot is older still (a backfill, a task due long
// ago): the same pass must not forget it.
func TestLedgerKeepsAnOldSlotFiredLate(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	now := t0.Add(100 * 24 * time.Hour)
	key := RunKey("daily", t0)
	require.Nil(t, b.apply(CmdStartRun, StartRun{Key: key, Rule: "daily", Slot: t0, Manual: true, Now: now}))
	require.Nil(t, b.apply(CmdFinishPlan, FinishPlan{RunKey: key, Now: now}))
	b.apply(CmdSubmitTask, SubmitTask{Key: "k", Rule: "r", DueAt: t0, Now: now})
	require.Nil(t, b.apply(CmdStartRun, StartRun{Key: TaskRunKey("k"), Rule: "r", Slot: t0, TaskKey: "k", Now: now}))
	require.Nil(t, b.apply(CmdFinishPlan, FinishPlan{RunKey: TaskRunKey("k"), Now: now}))

	later := now.Add(8 * 24 * time.Hour)
	res := b.apply(CmdPrune, Prune{Before: later.Add(-7 * 24 * time.Hour), LedgerBefore: later.Add(-90 * 24 * time.Hour), Now: later}).(PruneResult)
	require.Equal(t, 2, res.Runs)
	err, _ := b.apply(CmdStartRun, StartRun{Key: key, Rule: "daily", Slot: t0, Manual: true, Now: later}).(error)
	require.ErrorIs(t, err, ErrRunExists, "the slot fired twice")
	err, _ = b.apply(CmdSubmitTask, SubmitTask{Key: "k", Rule: "r", DueAt: t0, Now: later}).(error)
	require.ErrorIs(t, err, ErrTaskKeyUsed)
}

// Missed slots older than the retention are forgotten with the rest, so a
// person who fails every day does not carry an ever longer list.
func TestPruneForgetsOldMissedSlots(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	key := b.planned("daily", "alice")
	c := b.claim("n1", t0, DeliveryID(key, "alice"))
	b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: t0, Results: []Settlement{{ID: c[0].ID, Seq: c[0].Seq, Status: heraldtype.StatusPermanent}}})
	require.Len(t, b.fsm.Missed("daily")["alice"], 1)

	res := b.apply(CmdPrune, Prune{Before: t0, LedgerBefore: t0.Add(-time.Hour), Now: t0}).(PruneResult)
	require.Zero(t, res.Missed, "not yet older than the retention")
	require.Len(t, b.fsm.Missed("daily")["alice"], 1)

	later := t0.Add(8 * 24 * time.Hour)
	res = b.apply(CmdPrune, Prune{Before: later.Add(-7 * 24 * time.Hour), LedgerBefore: later.Add(-90 * 24 * time.Hour), Now: later}).(PruneResult)
	require.Equal(t, 1, res.Missed)
	require.Empty(t, b.fsm.Missed("daily"))
}

// A task key whose run exists is refused at submit, like one in the ledger.
func TestSubmitRefusesATaskKeyWhoseRunExists(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	require.Nil(t, b.apply(CmdStartRun, StartRun{Key: TaskRunKey("k"), Rule: "r", Slot: t0, Now: t0}))
	err, _ := b.apply(CmdSubmitTask, SubmitTask{Key: "k", Rule: "r", DueAt: t0, Now: t0}).(error)
	require.ErrorIs(t, err, ErrTaskKeyUsed)
}

// SubmitTasks submits as that many SubmitTask in a row would: the same
// answers (created, the same again, a conflict, a refusal) and the same
// state; Admit holds it while a member applies FSM version 4.
func TestSubmitTasksIsSubmitTaskInARow(t *testing.T) {
	t.Parallel()
	due := t0.Add(time.Hour)
	subs := []SubmitTask{
		{Key: "a", Rule: "r", DueAt: due, Data: []byte(`{"n":1}`), Now: t0},
		{Key: "b", Rule: "r", DueAt: due, Now: t0},
		{Key: "a", Rule: "r", DueAt: due, Data: []byte(`{"n":1}`), Now: t0}, // the same again
		{Key: "b", Rule: "r", DueAt: due.Add(time.Minute), Now: t0},         // a conflict
		{Key: "", Rule: "r", DueAt: due, Now: t0},                           // refused
		{Key: "c", Rule: "r", DueAt: due, Now: t0},
	}
	one, many := setupFSM(t), setupFSM(t)
	var want []any
	for _, s := range subs {
		want = append(want, one.apply(CmdSubmitTask, s))
	}
	got := many.apply(CmdSubmitTasks, SubmitTasks{Tasks: subs}).([]any)
	require.Len(t, got, len(subs))
	for i := range subs {
		if err, ok := want[i].(error); ok {
			require.EqualError(t, got[i].(error), err.Error(), "task %d", i)
			continue
		}
		w, g := want[i].(SubmitResult), got[i].(SubmitResult)
		require.Equal(t, w.Created, g.Created, "task %d", i)
		require.Equal(t, *w.Task, *g.Task, "task %d", i)
	}
	require.Equal(t, one.fsm.PendingTasks("", 10), many.fsm.PendingTasks("", 10))

	many.apply(CmdUpsertMember, Member{ID: "n1", FSMVersion: FSMVersion})
	many.apply(CmdUpsertMember, Member{ID: "n2", FSMVersion: FSMGroupedWrites - 1})
	cmd, err := Encode(CmdSubmitTasks, SubmitTasks{Tasks: subs[:1]})
	require.NoError(t, err)
	_, err = many.fsm.Admit(cmd)
	require.ErrorIs(t, err, ErrMembersBehind)
}

// Pending tasks and the others are indexed apart; every listing reads
// them as one order, by due time then key, as a sort of all tasks would.
func TestListTasksMergesPendingAndEnded(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	const n = 120
	for i := range n {
		k := fmt.Sprintf("t%03d", (i*37)%n)
		b.apply(CmdSubmitTask, SubmitTask{Key: k, Rule: []string{"r1", "r2"}[i%2], DueAt: t0.Add(time.Duration(i%7) * time.Minute), Now: t0})
		switch i % 5 {
		case 1:
			b.apply(CmdCancelTask, CancelTask{Key: k, Now: t0})
		case 3:
			require.Nil(t, b.apply(CmdStartRun, StartRun{Key: TaskRunKey(k), Rule: "r", Slot: t0, TaskKey: k, Now: t0}))
		}
	}
	check := func(f *FSM) {
		t.Helper()
		require.Equal(t, f.st.Tasks.Len(), f.st.taskQueue.Len()+f.st.taskDone.Len(), "each task in one index")
		all := slices.SortedFunc(f.st.Tasks.Values(), func(a, b *Task) int {
			if c := a.DueAt.Compare(b.DueAt); c != 0 {
				return c
			}
			return strings.Compare(a.Key, b.Key)
		})
		for _, flt := range []TaskFilter{
			{}, {State: TaskPending}, {State: TaskFired}, {State: TaskCancelled}, {Rule: "r2"},
			{From: t0.Add(2 * time.Minute), To: t0.Add(5 * time.Minute)}, {State: TaskCancelled, From: t0.Add(3 * time.Minute)},
		} {
			var want []string
			for _, tk := range all {
				if (flt.State == 0 || tk.State == flt.State) && (flt.Rule == "" || tk.Rule == flt.Rule) &&
					!tk.DueAt.Before(flt.From) && (flt.To.IsZero() || tk.DueAt.Before(flt.To)) {
					want = append(want, tk.Key)
				}
			}
			for _, limit := range []int{0, 1, 7, n} {
				var got []string
				page := flt
				page.Limit = limit
				for {
					tasks, more := f.ListTasks(page)
					for _, tk := range tasks {
						got = append(got, tk.Key)
					}
					if !more {
						break
					}
					require.Len(t, tasks, limit)
					last := tasks[len(tasks)-1]
					page.AfterDue, page.AfterKey = last.DueAt, last.Key
				}
				require.Equal(t, want, got, "filter %+v, pages of %d", flt, limit)
			}
		}
	}
	check(b.fsm)
	check(roundTrip(t, b.fsm))
}

// The due indexes hold instants as Unix nanoseconds: the same order and
// the same instants as time.Time within their range, and a task due past
// it still indexed, listed and never due early.
func TestDueItemKeepsOrderAndInstants(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 3, 9, 0, 0, 123, time.FixedZone("CST", 8*3600))
	require.True(t, newDue(at, "x").time().Equal(at))
	require.Equal(t, time.UTC, newDue(at, "x").time().Location())
	require.True(t, dueLess(newDue(at, "b"), newDue(at.Add(1), "a")))
	require.True(t, dueLess(newDue(at, "a"), newDue(at, "b")))
	require.True(t, newDue(at.Add(1), "").after(at))
	require.False(t, newDue(at, "").after(at))
	far, farther := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	require.True(t, dueLess(newDue(at, "z"), newDue(far, "a")))
	require.True(t, newDue(farther, "").after(far.AddDate(-50, 0, 0)))

	b := setupFSM(t)
	b.apply(CmdSubmitTask, SubmitTask{Key: "far", Rule: "r", DueAt: far, Now: t0})
	b.apply(CmdSubmitTask, SubmitTask{Key: "old", Rule: "r", DueAt: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), Now: t0})
	b.apply(CmdSubmitTask, SubmitTask{Key: "now", Rule: "r", DueAt: t0, Now: t0})
	keys := func(ts []*Task) (out []string) {
		for _, tk := range ts {
			out = append(out, tk.Key)
		}
		return out
	}
	listed, _ := b.fsm.ListTasks(TaskFilter{})
	require.Equal(t, []string{"old", "now", "far"}, keys(listed))
	require.Equal(t, []string{"old", "now"}, keys(b.fsm.DueTasks(t0, 10)))
	require.Equal(t, []string{"old", "now"}, keys(b.fsm.DueTasks(far.AddDate(-100, 0, 0), 10)))
	require.Equal(t, 3, b.fsm.st.taskQueue.Len())
}
