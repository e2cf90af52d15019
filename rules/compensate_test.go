package rules

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/engine/leader"
)

// recipientRefusingSender sends to everyone but refuse, whose messages fail for
// good (WeCom's "userid not found").
type recipientRefusingSender struct{ refuse string }

func (recipientRefusingSender) Admit(string, string, heraldtype.Priority, time.Time) time.Duration {
	return 0
}

func (s recipientRefusingSender) Send(_ context.Context, _ string, batch []heraldtype.Message) ([]heraldtype.Result, error) {
	out := make([]heraldtype.Result, len(batch))
	for i, m := range batch {
		out[i] = heraldtype.Result{ID: m.ID, Status: heraldtype.StatusSent, ProviderID: "msg-" + m.ID}
		if m.Recipient == s.refuse {
			out[i] = heraldtype.Result{ID: m.ID, Status: heraldtype.StatusPermanent, Code: "60111", Error: "userid not found"}
		}
	}
	return out, nil
}

// TestCompensationThroughLeader: the engine's leader fires follow_up's
// task, the owner's message fails for good, and the rule's on_failed,
// called by the leader, submits the manager's task through the log.
func TestCompensationThroughLeader(t *testing.T) {
	t.Parallel()
	s := load(t, exampleCopies(t, "follow_up.lua", "people.csv"))
	node := enginetest.New()
	due := mustTime(t, "2026-12-01T15:00:00+08:00")
	node.MustApply(t, engine.CmdSubmitTask, engine.SubmitTask{Key: "follow-8812", Rule: "follow_up", DueAt: due,
		Data: []byte(`{"customer":"华东机电","note":"确认报价","owner":"wangfang"}`), Now: due.Add(-time.Hour)})

	// Past the end of the 10-minute digest window the reminder falls in:
	// follow_up's reminders go then.
	now := due.Add(10*time.Minute + time.Second)
	l, err := leader.New(leader.Config{
		NodeID: "n1", FSM: node.FSM, Replicator: node, Rules: s, Sender: recipientRefusingSender{refuse: "wangfang"},
		ScheduleFunc: func(engine.Rule) (engine.Schedule, error) { return nil, errors.New("no scheduled rules here") },
		NowFunc:      func() time.Time { return now },
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	defer func() { cancel(); <-done }()

	failed := engine.DeliveryID(engine.TaskRunKey("follow-8812"), "wangfang")
	key := "follow-undelivered-" + failed
	require.Eventually(t, func() bool { _, ok := node.FSM.Task(key); return ok }, 10*time.Second, 5*time.Millisecond,
		"on_failed submitted no task")
	task, _ := node.FSM.Task(key)
	require.Equal(t, "follow_up", task.Rule)
	require.True(t, task.DueAt.Equal(due.Add(30*time.Minute)), task.DueAt)
	require.Equal(t, `{"customer":"华东机电","note":"确认报价","owner":"wangfang","undelivered":true}`, string(task.Data))
	require.Equal(t, engine.TaskPending, task.State)
	require.True(t, task.SubmittedAt.Equal(now), "stamped by the leader's clock")
	d, ok := node.FSM.Delivery(failed)
	require.True(t, ok)
	require.Equal(t, engine.StateFailed, d.State)
	require.Len(t, node.FSM.RunDeliveries(engine.TaskRunKey("follow-8812")), 1, "the owner only, at first")
}
