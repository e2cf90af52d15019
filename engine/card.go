package engine

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// Cards that answer back: a click on a delivery's interactive template
// card (a wecom.template_card_event whose TaskId is the delivery id) runs
// the rule's on_action on the leader; ClickCard (75) then records the
// click on the delivery with the replacement card on_action returned, if
// any, before anything is sent, and the leader asks the channel to
// replace the card (engine.CardUpdater, WeCom's update_template_card)
// and replicates the verdict (RecordCardUpdates, 76). Both since FSM
// version 4.

// MaxClicks bounds Delivery.Clicks: the latest are kept.
const MaxClicks = 20

// The states of a click's card update.
const (
	CardUpdatePending = "pending" // replicated, not answered by the channel yet
	CardUpdated       = "updated"
	CardUpdateFailed  = "failed"
)

// CardClick is one click on a delivery's card and the card's update after
// it. Records are replaced, never mutated.
type CardClick struct {
	// Event is the click's event id: a click is recorded once.
	Event  string    `json:"event"`
	Key    string    `json:"key"`
	UserID string    `json:"userid"`
	At     time.Time `json:"at"`
	// ResponseCode is the click's, for update_template_card (72 h, once).
	ResponseCode string `json:"response_code,omitempty"`
	// Update is the replacement card on_action returned (nil: none);
	// UpdateState is "" without one, else pending, updated or failed.
	Update      json.RawMessage `json:"update,omitempty"`
	UpdateState string          `json:"update_state,omitempty"`
	UpdatedAt   time.Time       `json:"updated_at,omitzero"`
	Code        string          `json:"code,omitempty"`
	Error       string          `json:"error,omitempty"`
	Tries       int             `json:"tries,omitempty"`
}

// ClickCard (75) records a click on delivery ID's card.
type ClickCard struct {
	ID    string    `json:"id"`
	Click CardClick `json:"click"`
	Now   time.Time `json:"now"`
}

// RecordCardUpdates (76) records the channels' verdicts on card updates.
type RecordCardUpdates struct {
	Results []CardUpdateOutcome `json:"results"`
	Now     time.Time           `json:"now"`
}

// CardUpdateOutcome is one channel verdict on a click's card update.
type CardUpdateOutcome struct {
	ID     string            `json:"id"`
	Event  string            `json:"event"`
	Status heraldtype.Status `json:"status"`
	Code   string            `json:"code,omitempty"`
	Error  string            `json:"error,omitempty"`
	// GiveUp ends a retryable verdict as failed (the leader's last try).
	GiveUp bool `json:"give_up,omitempty"`
}

// cardKey names a pending card update in state.cardUpdates.
func cardKey(id, event string) string { return id + "\x00" + event }

// clickCard records c.Click unless its event is on the delivery already;
// it returns whether it recorded it.
func (a applier) clickCard(c ClickCard) any {
	a.stamp(c.Now)
	d, ok := a.st.Deliveries.Get(c.ID)
	if !ok || c.Click.Event == "" {
		return false
	}
	if slices.ContainsFunc(d.Clicks, func(k CardClick) bool { return k.Event == c.Click.Event }) {
		return false // WeCom's retry, or a second leader's pass
	}
	k := c.Click
	k.UpdateState, k.UpdatedAt, k.Code, k.Error, k.Tries = "", time.Time{}, "", "", 0
	if len(k.Update) > 0 {
		k.UpdateState = CardUpdatePending
	}
	nd := *d
	nd.Clicks = append(slices.Clone(d.Clicks), k)
	if over := len(nd.Clicks) - MaxClicks; over > 0 {
		for _, old := range nd.Clicks[:over] {
			delete(a.st.cardUpdates, cardKey(c.ID, old.Event))
		}
		nd.Clicks = nd.Clicks[over:]
	}
	a.st.putDelivery(&nd)
	if k.UpdateState == CardUpdatePending {
		a.st.cardUpdates[cardKey(c.ID, k.Event)] = true
	}
	a.st.usesV4 = true
	return true
}

func (a applier) recordCardUpdates(c RecordCardUpdates) any {
	a.stamp(c.Now)
	n := 0
	for _, r := range c.Results {
		d, ok := a.st.Deliveries.Get(r.ID)
		if !ok {
			continue
		}
		i := slices.IndexFunc(d.Clicks, func(k CardClick) bool { return k.Event == r.Event })
		if i < 0 || d.Clicks[i].UpdateState != CardUpdatePending {
			continue // a late or repeated verdict changes nothing
		}
		k := d.Clicks[i]
		k.Tries++
		k.Code, k.Error = r.Code, r.Error
		switch {
		case r.Status == heraldtype.StatusSent:
			k.UpdateState, k.UpdatedAt = CardUpdated, c.Now
		case (r.Status == heraldtype.StatusRetryable || r.Status == heraldtype.StatusRateLimited) && !r.GiveUp:
		default:
			k.UpdateState, k.UpdatedAt = CardUpdateFailed, c.Now
		}
		nd := *d
		nd.Clicks = slices.Clone(d.Clicks)
		nd.Clicks[i] = k
		a.st.putDelivery(&nd)
		if k.UpdateState != CardUpdatePending {
			delete(a.st.cardUpdates, cardKey(r.ID, r.Event))
		}
		n++
	}
	return n
}

// PendingCardUpdate is a click whose replacement card waits for its
// channel.
type PendingCardUpdate struct {
	Delivery *Delivery
	Click    CardClick
}

// CardUpdatesPending returns the card updates waiting for their channel,
// by delivery id and event.
func (f *FSM) CardUpdatesPending() []PendingCardUpdate {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]PendingCardUpdate, 0, len(f.st.cardUpdates))
	for _, key := range slices.Sorted(maps.Keys(f.st.cardUpdates)) {
		id, ev, _ := strings.Cut(key, "\x00")
		d, ok := f.st.Deliveries.Get(id)
		if !ok {
			continue
		}
		if i := slices.IndexFunc(d.Clicks, func(k CardClick) bool { return k.Event == ev }); i >= 0 {
			out = append(out, PendingCardUpdate{Delivery: d, Click: d.Clicks[i]})
		}
	}
	return out
}

// CardAction is a click as a rule's on_action sees it.
type CardAction struct {
	Key    string    // the button's key (EventKey)
	UserID string    // who clicked (FromUserName)
	At     time.Time // when the click was recorded
	Event  string    // the click's event id
}

// ActionRules is a RuleSource that runs rules' on_action hooks: the
// replacement card it returns (nil: none) is a message body
// {"msgtype": "template_card", …}.
type ActionRules interface {
	OnAction(ctx context.Context, rule string, run RunContext, d *Delivery, a CardAction, ops TaskOps) (json.RawMessage, error)
}
