package engine

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// signalled says whether ch holds a wake-up, taking it. Apply and Restore
// signal before they return, so no wait is needed.
func signalled(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestSubscribeTopics: a subscription is woken for its topics only, once
// however many changes came (coalescing), by Restore for every topic, and
// no more once ended.
func TestSubscribeTopics(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	anyCh, endAny := b.fsm.Subscribe()
	defer endAny()
	tasks, endTasks := b.fsm.Subscribe(TasksChange)
	defer endTasks()
	both, endBoth := b.fsm.Subscribe(AnyChange, TasksChange)

	b.apply(CmdUpsertMember, Member{ID: "n1"})
	b.apply(CmdUpsertMember, Member{ID: "n2"})
	require.True(t, signalled(anyCh), "every Apply wakes AnyChange")
	require.False(t, signalled(anyCh), "two changes, one wake-up")
	require.False(t, signalled(tasks), "a member is not a task change")
	require.True(t, signalled(both))

	b.apply(CmdSubmitTask, SubmitTask{Key: "k", Rule: "r", DueAt: t0.Add(time.Hour), Now: t0})
	require.True(t, signalled(anyCh))
	require.True(t, signalled(tasks), "a submitted task wakes TasksChange")
	require.True(t, signalled(both))
	require.False(t, signalled(both), "one wake-up for both topics of one Apply")

	endBoth()
	snap, err := b.fsm.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, snap.Persist(&buf))
	require.NoError(t, b.fsm.Restore(&buf))
	require.True(t, signalled(anyCh), "a restore wakes AnyChange")
	require.True(t, signalled(tasks), "a restore wakes TasksChange")
	require.False(t, signalled(both), "an ended subscription is not woken")
}
