package leader

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// recallSender is the sim's sender with recall: channel "robot" recalls
// nothing; busy answers the first recalls retryable.
type recallSender struct {
	*simSender
	mu       sync.Mutex
	recalled []string
	busy     int
}

func (r *recallSender) Recall(_ context.Context, channel string, batch []heraldtype.RecallMessage) ([]heraldtype.RecallResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]heraldtype.RecallResult, len(batch))
	for i, m := range batch {
		switch {
		case channel == "robot":
			out[i] = heraldtype.RecallResult{ID: m.ID, Status: heraldtype.RecallNotRecallable, Error: "a robot's messages cannot be recalled"}
		case r.busy > 0:
			r.busy--
			out[i] = heraldtype.RecallResult{ID: m.ID, Status: heraldtype.RecallRetryable, Code: "-1", Error: "system busy"}
		default:
			r.recalled = append(r.recalled, m.ProviderID)
			out[i] = heraldtype.RecallResult{ID: m.ID, Status: heraldtype.RecallDone}
		}
	}
	return out, nil
}

// TestRecallRun: a run's sent messages are recalled through the channel
// (a retryable answer asked again), each once; what cannot be recalled
// (unsent, robot, too old) is refused one by one and changes nothing.
func TestRecallRun(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, start, engine.Rule{Name: "daily", Schedule: "0 2 * * *", Channel: "mock"}, engine.Rule{Name: "bot", Schedule: "0 2 * * *", Channel: "robot"})
	rs := &recallSender{simSender: s.sender, busy: 1}
	s.cfg.Sender = rs
	s.rules.plan["daily"] = to("alice", "bob")
	s.rules.plan["bot"] = to("group")
	s.lead("n1")
	s.advance(start.Add(65*time.Minute), time.Second)
	require.Len(t, s.sender.all(), 3)
	daily, bot := s.runs("daily")[0], s.runs("bot")[0]
	var ids []string
	for _, d := range s.log.fsm.RunDeliveries(daily.Key) {
		ids = append(ids, d.ID)
	}
	botID := s.log.fsm.RunDeliveries(bot.Key)[0].ID

	all := append(append([]string{}, ids...), botID, "nope")
	asked := s.apply(engine.CmdRecallDeliveries, engine.RecallDeliveries{IDs: all, By: "ops", Now: s.clock.Now()}).(engine.RecallAsked)
	require.ElementsMatch(t, append(ids, botID), asked.Requested)
	require.Equal(t, []engine.RecallSkip{{ID: "nope", Reason: "no such delivery"}}, asked.Skipped)
	rc := newRecaller(s.l)
	for range 5 {
		next := rc.runOnce(s.ctx)
		if len(s.log.fsm.RecallsAsked()) == 0 {
			break
		}
		s.clock.Set(next)
	}
	require.Empty(t, s.log.fsm.RecallsAsked())
	for _, id := range ids {
		d, _ := s.log.fsm.Delivery(id)
		require.Equal(t, engine.StateRecalled, d.State)
		require.Equal(t, "recalled", d.State.String())
		require.Equal(t, "ops", d.Recall.By)
	}
	require.Len(t, rs.recalled, 2, "each recalled once")
	b, _ := s.log.fsm.Delivery(botID)
	require.Equal(t, engine.StateSent, b.State, "the robot's stays sent")
	require.True(t, b.Recall.Done)
	require.Contains(t, b.Recall.Error, "robot")

	again := s.apply(engine.CmdRecallDeliveries, engine.RecallDeliveries{IDs: ids[:1], By: "ops", Now: s.clock.Now()}).(engine.RecallAsked)
	require.Equal(t, []engine.RecallSkip{{ID: ids[0], Reason: "already recalled"}}, again.Skipped)
	late := s.apply(engine.CmdRecallDeliveries, engine.RecallDeliveries{IDs: []string{botID}, By: "ops", Now: s.clock.Now().Add(25 * time.Hour)}).(engine.RecallAsked)
	require.Len(t, late.Skipped, 1)
	require.Contains(t, late.Skipped[0].Reason, "more than 24 h ago")
}

// A sender without recall answers every recall not recallable.
func TestRecallWithoutRecaller(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, start, engine.Rule{Name: "daily", Schedule: "0 2 * * *", Channel: "mock"})
	s.rules.plan["daily"] = to("alice")
	s.lead("n1")
	s.advance(start.Add(65*time.Minute), time.Second)
	id := s.log.fsm.RunDeliveries(s.runs("daily")[0].Key)[0].ID
	s.apply(engine.CmdRecallDeliveries, engine.RecallDeliveries{IDs: []string{id}, By: "ops", Now: s.clock.Now()})
	newRecaller(s.l).runOnce(s.ctx)
	d, _ := s.log.fsm.Delivery(id)
	require.Equal(t, engine.StateSent, d.State)
	require.True(t, d.Recall.Done)
	require.Contains(t, d.Recall.Error, "cannot recall")
}
