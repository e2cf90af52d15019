package leader

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// eventRules takes wecom.kf.message in rule "enq" and records each call;
// it submits a task keyed by the event, as a hook must.
type eventRules struct {
	staticRules
	mu    sync.Mutex
	calls []string
}

func (r *eventRules) OnEvent(ctx context.Context, rule string, ev engine.EventContext, ops engine.TaskOps) error {
	r.mu.Lock()
	r.calls = append(r.calls, rule+" "+ev.ID)
	r.mu.Unlock()
	_, err := ops.Submit(ctx, engine.SubmitTask{Key: "enq-" + ev.ID[len(ev.ID)-2:], Rule: rule, DueAt: ev.At.Add(15 * time.Minute)})
	return err
}

// The event loop pulls kf/sync_msg from the state's cursor, records the
// page with its cursor, runs the hooks once per message in WeCom's order,
// and marks everything handled; a failed pull leaves the event for later.
func TestEventLoopSyncsKfAndRunsHooks(t *testing.T) {
	t.Parallel()
	b := setupLeader(t)
	rules := &eventRules{staticRules: staticRules{rules: []engine.Rule{{Name: "enq", Events: []string{engine.EventWecomKfMessage}}}}}
	var cursors []string
	fail := true
	l, err := New(Config{NodeID: "n1", FSM: b.log.fsm, Replicator: b.log, Rules: rules, Sender: b.sender,
		ScheduleFunc: func(engine.Rule) (engine.Schedule, error) { return everySecond{}, nil },
		EventsConfig: EventsConfig{KfSyncFunc: func(_ context.Context, channel, openKfID, token, cursor string) (engine.KfPage, error) {
			cursors = append(cursors, cursor)
			if fail {
				return engine.KfPage{}, errors.New("kf/sync_msg: timeout")
			}
			if cursor == "" {
				return engine.KfPage{NextCursor: "c1", HasMore: true, Messages: []engine.KfMessage{
					{ID: "zz", Data: json.RawMessage(`{"msgid":"zz"}`)}, {ID: "aa", Data: json.RawMessage(`{"msgid":"aa"}`)}}}, nil
			}
			return engine.KfPage{NextCursor: "c2"}, nil
		}}})
	require.NoError(t, err)
	ctx := context.Background()
	now := time.Now()
	cmd, err := engine.Encode(engine.CmdRecordEvent, engine.RecordEvent{NewEvent: engine.NewEvent{ID: "wecom:w:kf_msg_or_event:1",
		Type: engine.EventWecomKfNotify, Source: "wecom:w", Data: json.RawMessage(`{"OpenKfId":"wk1","Token":"T"}`)}, Now: now})
	require.NoError(t, err)
	_, err = b.log.Apply(ctx, cmd)
	require.NoError(t, err)

	e := newEventLoop(l)
	e.runOnce(ctx)
	require.Len(t, b.log.fsm.UnhandledEvents(10), 1, "a failed pull leaves the event")
	fail = false
	e.retry = map[string]time.Time{} // as if EventRetry had passed
	e.runOnce(ctx)
	require.Equal(t, []string{"", "", "c1"}, cursors)
	require.Equal(t, "c2", b.log.fsm.KfCursor("w", "wk1"))
	e.runOnce(ctx) // the messages recorded in the first pass
	require.Empty(t, b.log.fsm.UnhandledEvents(10))
	require.Equal(t, []string{"enq wecom:w:kf:zz", "enq wecom:w:kf:aa"}, rules.calls, "in WeCom's order, not by id")
	_, ok := b.log.fsm.Task("enq-zz")
	require.True(t, ok)
}
