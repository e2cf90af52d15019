package leader

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// cardRules is the sim's rules with on_action: "done" cancels task
// "again" and replaces the card with who clicked.
type cardRules struct {
	*simRules
	mu    sync.Mutex
	calls []string
}

func (r *cardRules) OnAction(ctx context.Context, rule string, run engine.RunContext, d *engine.Delivery, a engine.CardAction, ops engine.TaskOps) (json.RawMessage, error) {
	r.mu.Lock()
	r.calls = append(r.calls, rule+" "+d.ID+" "+a.Key+" "+a.UserID)
	r.mu.Unlock()
	if a.Key != "done" {
		return nil, nil
	}
	if _, err := ops.Cancel(ctx, "again"); err != nil {
		return nil, err
	}
	return json.RawMessage(`{"msgtype":"template_card","template_card":{"card_type":"button_interaction","sub_title_text":"done by ` + a.UserID + `"}}`), nil
}

// cardSender is the sim's sender that updates cards; busy answers the
// first updates retryable.
type cardSender struct {
	*simSender
	mu      sync.Mutex
	updates []heraldtype.CardUpdate
	busy    int
}

func (c *cardSender) UpdateCards(_ context.Context, _ string, batch []heraldtype.CardUpdate) ([]heraldtype.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]heraldtype.Result, len(batch))
	for i, u := range batch {
		if c.busy > 0 {
			c.busy--
			out[i] = heraldtype.Result{ID: u.ID, Status: heraldtype.StatusRetryable, Code: "-1", Error: "system busy"}
			continue
		}
		c.updates = append(c.updates, u)
		out[i] = heraldtype.Result{ID: u.ID, Status: heraldtype.StatusSent}
	}
	return out, nil
}

// TestCardClickRunsOnActionAndUpdatesTheCard: a template_card_event whose
// TaskId is a delivery runs its rule's on_action once (WeCom's retry of the
// same event changes nothing), which cancels a task; the click is on the
// delivery, and the replacement card goes to the channel with the click's
// response_code (a retryable answer asked again) and ends updated.
func TestCardClickRunsOnActionAndUpdatesTheCard(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, start, engine.Rule{Name: "follow", Schedule: "0 2 * * *", Channel: "wecom"})
	rules := &cardRules{simRules: s.rules}
	cs := &cardSender{simSender: s.sender, busy: 1}
	s.cfg.Rules, s.cfg.Sender = rules, cs
	s.rules.plan["follow"] = to("alice")
	s.lead("n1")
	s.advance(start.Add(65*time.Minute), time.Second)
	require.Len(t, s.sender.all(), 1)
	id := s.log.fsm.RunDeliveries(s.runs("follow")[0].Key)[0].ID
	res := s.apply(engine.CmdSubmitTask, engine.SubmitTask{Key: "again", Rule: "follow", DueAt: s.clock.Now().Add(time.Hour), Now: s.clock.Now()})
	require.NotNil(t, res.(engine.SubmitResult).Task)

	data := json.RawMessage(`{"FromUserName":"alice","EventKey":"done","TaskId":"` + id + `","CardType":"button_interaction","ResponseCode":"RC1"}`)
	for range 2 { // WeCom's retry: the same event id
		s.apply(engine.CmdRecordEvent, engine.RecordEvent{NewEvent: engine.NewEvent{ID: "wecom:w:card:alice:1", Type: engine.EventWecomCard, Source: "wecom:wecom", Data: data}, Now: s.clock.Now()})
	}
	e := newEventLoop(s.l)
	for range 5 {
		next := e.runOnce(s.ctx)
		if len(s.log.fsm.CardUpdatesPending()) == 0 && len(s.log.fsm.UnhandledEvents(10)) == 0 {
			break
		}
		s.clock.Set(next)
	}
	require.Equal(t, []string{"follow " + id + " done alice"}, rules.calls)
	task, _ := s.log.fsm.Task("again")
	require.Equal(t, engine.TaskCancelled, task.State)
	d, _ := s.log.fsm.Delivery(id)
	require.Len(t, d.Clicks, 1)
	k := d.Clicks[0]
	require.Equal(t, "done", k.Key)
	require.Equal(t, "alice", k.UserID)
	require.Equal(t, engine.CardUpdated, k.UpdateState)
	require.Equal(t, 2, k.Tries)
	require.Len(t, cs.updates, 1)
	require.Equal(t, "RC1", cs.updates[0].ResponseCode)
	require.Equal(t, "alice", cs.updates[0].Recipient)
	require.Contains(t, string(cs.updates[0].Payload), "done by alice")

	// A click from another channel (or posted to /v1/events) on this
	// card reaches no on_action.
	s.apply(engine.CmdRecordEvent, engine.RecordEvent{NewEvent: engine.NewEvent{ID: "api:forged", Type: engine.EventWecomCard, Source: "api", Data: data}, Now: s.clock.Now()})
	e.runOnce(s.ctx)
	require.Len(t, rules.calls, 1)
	d, _ = s.log.fsm.Delivery(id)
	require.Len(t, d.Clicks, 1)

	// A click on a card of no delivery here reaches no on_action.
	s.apply(engine.CmdRecordEvent, engine.RecordEvent{NewEvent: engine.NewEvent{ID: "wecom:w:card:x", Type: engine.EventWecomCard, Source: "wecom:w",
		Data: json.RawMessage(`{"FromUserName":"bob","EventKey":"done","TaskId":"elsewhere"}`)}, Now: s.clock.Now()})
	e.runOnce(s.ctx)
	require.Len(t, rules.calls, 1)
	require.Empty(t, s.log.fsm.UnhandledEvents(10))
}
