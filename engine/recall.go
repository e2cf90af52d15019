package engine

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// Recall: a person asks for sent messages to be taken back
// (RecallDeliveries, 71); the leader asks each one's channel
// (engine.Recaller, WeCom's message/recall) and replicates the verdicts
// (RecordRecalls, 72). Only a sent message with a provider message id,
// sent within RecallWindow, is asked for; every other is refused at once
// with its reason, and nothing about it changes. Both since FSM version 4.

// RecallWindow is how long after its send a message may be recalled:
// WeCom takes app messages back within 24 h.
const RecallWindow = 24 * time.Hour

// Recall is a delivery's recall: asked by By at RequestedAt; Done once the
// channel answered: recalled (the delivery is then StateRecalled, At set)
// or refused (Code, Error; the delivery stays sent). A retryable answer
// keeps it asked, its error the last one.
type Recall struct {
	By          string    `json:"by"`
	RequestedAt time.Time `json:"requested_at"`
	Done        bool      `json:"done,omitempty"`
	At          time.Time `json:"at,omitzero"`
	Code        string    `json:"code,omitempty"`
	Error       string    `json:"error,omitempty"`
	Tries       int       `json:"tries,omitempty"`
}

// RecallDeliveries (71) asks for sent deliveries to be recalled.
type RecallDeliveries struct {
	IDs []string  `json:"ids"`
	By  string    `json:"by"`
	Now time.Time `json:"now"`
}

// RecallSkip is a delivery that cannot be recalled, and why.
type RecallSkip struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// RecallAsked is what Apply returns for RecallDeliveries: the ids now
// waiting for their channel, and those refused at once.
type RecallAsked struct {
	Requested []string     `json:"requested"`
	Skipped   []RecallSkip `json:"skipped"`
}

// RecordRecalls (72) records the channels' verdicts on asked recalls.
type RecordRecalls struct {
	Results []RecallOutcome `json:"results"`
	Now     time.Time       `json:"now"`
}

// RecallOutcome is one channel verdict.
type RecallOutcome struct {
	ID     string                  `json:"id"`
	Status heraldtype.RecallStatus `json:"status"`
	Code   string                  `json:"code,omitempty"`
	Error  string                  `json:"error,omitempty"`
}

// NotRecallable says why d cannot be recalled at now, "" when it can.
func NotRecallable(d *Delivery, now time.Time) string {
	switch {
	case d.State == StateRecalled:
		return "already recalled"
	case d.Digest != "":
		return "folded into digest " + d.Digest + ": recall that one"
	case d.State != StateSent:
		return "not sent (" + d.State.String() + ")"
	case d.ProviderID == "":
		return "the channel gave no message id: group robot (webhook) messages cannot be recalled"
	case !now.Before(d.SentAt.Add(RecallWindow)):
		return fmt.Sprintf("sent %s, more than 24 h ago: only app messages sent within 24 h can be recalled", d.SentAt.UTC().Format(time.RFC3339))
	}
	return ""
}

func (a applier) recallDeliveries(c RecallDeliveries) any {
	a.stamp(c.Now)
	out := RecallAsked{Requested: []string{}, Skipped: []RecallSkip{}}
	for _, id := range c.IDs {
		d, ok := a.st.Deliveries.Get(id)
		if !ok {
			out.Skipped = append(out.Skipped, RecallSkip{id, "no such delivery"})
			continue
		}
		if d.Recall != nil && !d.Recall.Done && d.State == StateSent {
			out.Requested = append(out.Requested, id) // asked already: asked once
			continue
		}
		if why := NotRecallable(d, c.Now); why != "" {
			out.Skipped = append(out.Skipped, RecallSkip{id, why})
			continue
		}
		nd := *d
		nd.Recall = &Recall{By: c.By, RequestedAt: c.Now}
		a.st.putDelivery(&nd)
		a.st.recalls[id] = true
		a.st.usesV4 = true
		out.Requested = append(out.Requested, id)
	}
	return out
}

func (a applier) recordRecalls(c RecordRecalls) any {
	a.stamp(c.Now)
	n := 0
	for _, r := range c.Results {
		d, ok := a.st.Deliveries.Get(r.ID)
		if !ok || d.Recall == nil || d.Recall.Done || d.State != StateSent {
			continue // a late or repeated verdict changes nothing
		}
		nd := *d
		rc := *d.Recall
		rc.Tries++
		rc.Code, rc.Error = r.Code, r.Error
		switch r.Status {
		case heraldtype.RecallDone:
			rc.Done, rc.At = true, c.Now
			nd.State = StateRecalled
		case heraldtype.RecallRetryable:
		default:
			rc.Done = true
		}
		nd.Recall = &rc
		a.st.putDelivery(&nd)
		if rc.Done {
			delete(a.st.recalls, r.ID)
		}
		n++
	}
	return n
}

// RecallsAsked returns the deliveries whose recall waits for their
// channel, by id.
func (f *FSM) RecallsAsked() []*Delivery {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Delivery, 0, len(f.st.recalls))
	for _, id := range slices.Sorted(maps.Keys(f.st.recalls)) {
		out = append(out, f.st.Deliveries.At(id))
	}
	return out
}
