package engine

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRecordEventOncePerID(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	ev := RecordEvent{NewEvent: NewEvent{ID: "e1", Type: "enquiry.replied", Source: "api", Data: json.RawMessage(`{"a":1}`)}, Now: t0}
	res := b.apply(CmdRecordEvent, ev).(RecordEventResult)
	require.True(t, res.Created)
	// WeCom's retry, or the same callback at a second node: one event.
	again := ev
	again.Now, again.Data = t0.Add(time.Minute), json.RawMessage(`{"a":2}`)
	res = b.apply(CmdRecordEvent, again).(RecordEventResult)
	require.False(t, res.Created)
	require.Equal(t, t0, res.Event.At)
	require.JSONEq(t, `{"a":1}`, string(res.Event.Data))

	require.Len(t, b.fsm.UnhandledEvents(10), 1)
	require.Equal(t, 1, b.apply(CmdEventsHandled, EventsHandled{IDs: []string{"e1", "nope"}, Now: t0}))
	require.Empty(t, b.fsm.UnhandledEvents(10))
	require.False(t, b.apply(CmdRecordEvent, again).(RecordEventResult).Created, "a handled event's id is still known")

	require.ErrorIs(t, b.apply(CmdRecordEvent, RecordEvent{NewEvent: NewEvent{Type: "x"}, Now: t0}).(error), ErrEventInvalid)

	// Pruned past retention: handled ones only.
	b.apply(CmdRecordEvent, RecordEvent{NewEvent: NewEvent{ID: "e2", Type: "t"}, Now: t0})
	require.Equal(t, 1, b.apply(CmdPruneEvents, PruneEvents{Before: t0.Add(time.Second), Now: t0.Add(time.Hour)}))
	_, ok := b.fsm.Event("e2")
	require.True(t, ok, "an unhandled event is never pruned")
}

func TestKfSyncedRecordsPageAndCursor(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	page := KfSynced{Channel: "wecom", OpenKfID: "wk1", Cursor: "c2", Now: t0, Events: []NewEvent{
		{ID: "wecom:kf:m1", Type: EventWecomKfMessage, Source: "wecom:wecom", Data: json.RawMessage(`{"msgid":"m1"}`)},
		{ID: "wecom:kf:m2", Type: EventWecomKfMessage, Source: "wecom:wecom", Data: json.RawMessage(`{"msgid":"m2"}`)},
	}}
	require.Equal(t, 2, b.apply(CmdKfSynced, page))
	require.Equal(t, "c2", b.fsm.KfCursor("wecom", "wk1"))
	// A leader that fetched the same page again adds nothing.
	require.Equal(t, 0, b.apply(CmdKfSynced, page))
	require.Len(t, b.fsm.UnhandledEvents(10), 2)
}

func TestReplaceTaskOnlyWhilePending(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.apply(CmdSubmitTask, SubmitTask{Key: "k", Rule: "r", DueAt: t0.Add(time.Hour), Data: json.RawMessage(`{"a":1}`), Now: t0})
	res := b.apply(CmdReplaceTask, ReplaceTask{Key: "k", DueAt: t0.Add(2 * time.Hour), Now: t0}).(ReplaceResult)
	require.True(t, res.Changed)
	require.Equal(t, t0.Add(2*time.Hour), res.Task.DueAt)
	require.JSONEq(t, `{"a":1}`, string(res.Task.Data), "absent data keeps the data")
	at, _ := b.fsm.NextTaskDue()
	require.Equal(t, t0.Add(2*time.Hour), at, "the due queue follows")
	require.False(t, b.apply(CmdReplaceTask, ReplaceTask{Key: "k", DueAt: t0.Add(2 * time.Hour), Now: t0}).(ReplaceResult).Changed)
	res = b.apply(CmdReplaceTask, ReplaceTask{Key: "k", Data: json.RawMessage(`{"a":2}`), Now: t0}).(ReplaceResult)
	require.JSONEq(t, `{"a":2}`, string(res.Task.Data))
	require.Len(t, b.fsm.PendingTasks("k", 10), 1)
	require.Empty(t, b.fsm.PendingTasks("x", 10))

	require.ErrorIs(t, b.apply(CmdReplaceTask, ReplaceTask{Key: "nope", DueAt: t0, Now: t0}).(error), ErrNoTask)
	b.apply(CmdCancelTask, CancelTask{Key: "k", Now: t0})
	require.ErrorIs(t, b.apply(CmdReplaceTask, ReplaceTask{Key: "k", DueAt: t0, Now: t0}).(error), ErrTaskNotPending)

	b.apply(CmdSubmitTask, SubmitTask{Key: "f", Rule: "r", DueAt: t0, Now: t0})
	b.apply(CmdStartRun, StartRun{Key: TaskRunKey("f"), Rule: "r", Slot: t0, TaskKey: "f", Now: t0})
	require.ErrorIs(t, b.apply(CmdReplaceTask, ReplaceTask{Key: "f", DueAt: t0.Add(time.Hour), Now: t0}).(error), ErrTaskNotPending)
}

func TestEventsSnapshotOnlyWhenPresent(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	require.Equal(t, uint16(2), snapshotFSM(b.fsm.st), "no events: a version-3 member takes the snapshot")
	b.apply(CmdRecordEvent, RecordEvent{NewEvent: NewEvent{ID: "e1", Type: "t", Source: "api"}, Now: t0})
	b.apply(CmdRecordEvent, RecordEvent{NewEvent: NewEvent{ID: "e2", Type: "t", Source: "api"}, Now: t0})
	b.apply(CmdEventsHandled, EventsHandled{IDs: []string{"e1"}, Now: t0})
	b.apply(CmdKfSynced, KfSynced{Channel: "w", OpenKfID: "k", Cursor: "c9", Now: t0})
	require.Equal(t, FSMEvents, snapshotFSM(b.fsm.st))
	snap, err := b.fsm.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, snap.Persist(&buf))
	snap.Release()
	restored := NewFSM()
	require.NoError(t, restored.Restore(bytes.NewReader(buf.Bytes())))
	require.Equal(t, "c9", restored.KfCursor("w", "k"))
	require.Equal(t, 2, restored.EventCount())
	u := restored.UnhandledEvents(10)
	require.Len(t, u, 1)
	require.Equal(t, "e2", u[0].ID)
}
