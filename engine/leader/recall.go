package leader

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// The recaller is the leader's loop for recalls (engine/recall.go): it asks
// each channel to take back the deliveries a person asked to recall, and
// replicates the verdicts. A retryable verdict is asked again after a
// doubling wait, at most maxRecallTries times in all.

const (
	maxRecallTries = 5
	recallRetryMin = 2 * time.Second
	// recallBatch is how many recalls one plugin call carries.
	recallBatch = 100
)

type recaller struct {
	l    *Leader
	next map[string]time.Time // retryable recalls: not before
}

func newRecaller(l *Leader) *recaller { return &recaller{l: l, next: map[string]time.Time{}} }

func (r *recaller) run(ctx context.Context) {
	r.l.untilDone(ctx, r.runOnce)
}

// runOnce asks the channels for what is due and returns when to look again.
func (r *recaller) runOnce(ctx context.Context) time.Time {
	now := r.l.now()
	wake := now.Add(time.Minute)
	byChannel := map[string][]heraldtype.RecallMessage{}
	tries := map[string]int{}
	for _, d := range r.l.cfg.FSM.RecallsAsked() {
		if at, ok := r.next[d.ID]; ok && now.Before(at) {
			wake = earlier(wake, at)
			continue
		}
		byChannel[d.Channel] = append(byChannel[d.Channel], heraldtype.RecallMessage{ID: d.ID, ProviderID: d.ProviderID, Recipient: d.Recipient, SentAt: d.SentAt})
		tries[d.ID] = d.Recall.Tries
	}
	for channel, all := range byChannel {
		for start := 0; start < len(all); start += recallBatch {
			batch := all[start:min(start+recallBatch, len(all))]
			results := r.recall(ctx, channel, batch)
			out := make([]engine.RecallOutcome, 0, len(results))
			for _, res := range results {
				o := engine.RecallOutcome{ID: res.ID, Status: res.Status, Code: res.Code, Error: res.Error}
				if o.Status == heraldtype.RecallRetryable {
					if tries[o.ID]+1 >= maxRecallTries {
						o.Status = heraldtype.RecallNotRecallable
						o.Error = fmt.Sprintf("gave up after %d tries: %s", maxRecallTries, o.Error)
					} else {
						at := now.Add(recallRetryMin << tries[o.ID])
						r.next[o.ID] = at
						wake = earlier(wake, at)
					}
				}
				if o.Status != heraldtype.RecallRetryable {
					delete(r.next, o.ID)
				}
				out = append(out, o)
			}
			if _, err := r.l.propose(ctx, engine.CmdRecordRecalls, engine.RecordRecalls{Results: out, Now: r.l.now()}); err != nil {
				r.l.log.Warn("cannot record recalls", "channel", channel, "n", len(out), "err", err)
				wake = earlier(wake, now.Add(retryFailedProposal))
			}
		}
	}
	return wake
}

// recall asks channel's plugin; a failed call answers every message
// retryable with the call's error.
func (r *recaller) recall(ctx context.Context, channel string, batch []heraldtype.RecallMessage) []heraldtype.RecallResult {
	rc, ok := r.l.cfg.Sender.(engine.Recaller)
	if !ok {
		return answerAll(batch, heraldtype.RecallNotRecallable, "this node's channels cannot recall messages")
	}
	results, err := rc.Recall(ctx, channel, batch)
	if err != nil {
		r.l.log.Warn("recall failed", "channel", channel, "n", len(batch), "err", err)
		return answerAll(batch, heraldtype.RecallRetryable, err.Error())
	}
	return results
}

func answerAll(batch []heraldtype.RecallMessage, s heraldtype.RecallStatus, why string) []heraldtype.RecallResult {
	out := make([]heraldtype.RecallResult, len(batch))
	for i, m := range batch {
		out[i] = heraldtype.RecallResult{ID: m.ID, Status: s, Error: why}
	}
	return out
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
