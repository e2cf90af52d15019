package leader

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// Card clicks (engine/card.go), in the event loop: a
// wecom.template_card_event whose TaskId names a delivery runs that
// delivery's rule's on_action, replicates the click with the replacement
// card it returned (ClickCard), and the card updates waiting for their
// channel are asked for at each pass and their verdicts replicated
// (RecordCardUpdates). A click on a card Herald did not send (no such
// delivery) only runs the on_event hooks that take the type.

const (
	maxCardTries = 5
	cardRetryMin = 2 * time.Second
)

// cardEvent is the data of a template_card_event, as WeCom names it.
type cardEvent struct {
	FromUserName string `json:"FromUserName"`
	EventKey     string `json:"EventKey"`
	TaskID       string `json:"TaskId"`
	ResponseCode string `json:"ResponseCode"`
}

// cardClick runs on_action for a click and records it; an error leaves the
// event for a later pass.
func (e *eventLoop) cardClick(ctx context.Context, ev *engine.Event) error {
	l := e.l
	var c cardEvent
	if err := json.Unmarshal(ev.Data, &c); err != nil || c.TaskID == "" {
		return nil
	}
	d, ok := l.cfg.FSM.Delivery(c.TaskID)
	if !ok {
		l.log.Info("card click for no delivery this cluster holds; only on_event hooks see it", "event", ev.ID, "task_id", c.TaskID)
		return nil
	}
	if ev.Source != "wecom:"+d.Channel {
		// Another app's callback, or one posted to /v1/events: only the
		// channel that sent the card speaks for a click on it.
		l.log.Warn("card click not from the delivery's channel; only on_event hooks see it", "event", ev.ID, "source", ev.Source, "delivery", d.ID, "channel", d.Channel)
		return nil
	}
	for _, k := range d.Clicks {
		if k.Event == ev.ID {
			return nil // recorded by an earlier pass that could not mark it handled
		}
	}
	click := engine.CardClick{Event: ev.ID, Key: c.EventKey, UserID: c.FromUserName, At: ev.At, ResponseCode: c.ResponseCode}
	if ar, ok := l.cfg.Rules.(engine.ActionRules); ok {
		cctx, cancel := context.WithTimeout(ctx, l.cfg.PlanTimeout)
		card, err := ar.OnAction(cctx, d.Rule, l.runContext(d), d, engine.CardAction{Key: c.EventKey, UserID: c.FromUserName, At: ev.At, Event: ev.ID}, e.taskOps())
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			// The click is still recorded (who clicked what is a fact);
			// the card stays as it was.
			l.log.Warn("rule's on_action failed", "rule", d.Rule, "delivery", d.ID, "event", ev.ID, "err", err)
			l.raise(ctx, engine.NewRaiseAlert(engine.AlertCause{Kind: engine.AlertEventError, Subject: d.Rule}, d.Rule,
				engine.AlertParams{Error: err.Error()},
				fmt.Sprintf("on_action of rule %s failed for %s's click %q on delivery %s: %v", d.Rule, c.FromUserName, c.EventKey, d.ID, err), l.now()))
		}
		click.Update = card
	}
	_, err := l.propose(ctx, engine.CmdClickCard, engine.ClickCard{ID: d.ID, Click: click, Now: l.now()})
	return err
}

// updateCards asks the channels for the card updates waiting now and
// returns when to look again.
func (e *eventLoop) updateCards(ctx context.Context, now time.Time) time.Time {
	l := e.l
	wake := now.Add(time.Minute)
	cu, ok := l.cfg.Sender.(engine.CardUpdater)
	for _, p := range l.cfg.FSM.CardUpdatesPending() {
		if ctx.Err() != nil {
			return wake
		}
		key := p.Delivery.ID + "/" + p.Click.Event
		if at, ok := e.cardNext[key]; ok && now.Before(at) {
			wake = earliest(wake, at)
			continue
		}
		o := engine.CardUpdateOutcome{ID: p.Delivery.ID, Event: p.Click.Event, Status: heraldtype.StatusPermanent, Error: "this node's channels cannot update cards"}
		if ok {
			res, err := cu.UpdateCards(ctx, p.Delivery.Channel, []heraldtype.CardUpdate{{ID: p.Delivery.ID, Recipient: p.Delivery.Recipient, ResponseCode: p.Click.ResponseCode, Payload: p.Click.Update}})
			switch {
			case ctx.Err() != nil:
				return wake
			case err != nil:
				o.Status, o.Error = heraldtype.StatusRetryable, err.Error()
			case len(res) == 1:
				o.Status, o.Code, o.Error = res[0].Status, res[0].Code, res[0].Error
			}
		}
		if retry := o.Status == heraldtype.StatusRetryable || o.Status == heraldtype.StatusRateLimited; retry {
			if p.Click.Tries+1 >= maxCardTries {
				o.GiveUp, o.Error = true, fmt.Sprintf("gave up after %d tries: %s", maxCardTries, o.Error)
			} else {
				e.cardNext[key] = now.Add(cardRetryMin << p.Click.Tries)
				wake = earliest(wake, e.cardNext[key])
			}
		}
		if _, err := l.propose(ctx, engine.CmdRecordCardUpdates, engine.RecordCardUpdates{Results: []engine.CardUpdateOutcome{o}, Now: l.now()}); err != nil {
			l.log.Warn("cannot record a card update", "delivery", o.ID, "err", err)
			wake = earliest(wake, now.Add(retryFailedProposal))
			continue
		}
		if o.Status == heraldtype.StatusSent || o.GiveUp {
			delete(e.cardNext, key)
		}
	}
	return wake
}
