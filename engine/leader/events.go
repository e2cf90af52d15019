package leader

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/heraldhq/herald/engine"
)

// The event loop, the leader's fourth: it reads the events not handled
// yet (oldest first), fetches 微信客服 messages for a kf_msg_or_event,
// runs the on_event hooks of the rules that take each event's type, and
// marks the events handled. A leader that dies in between leaves them
// unhandled for the next one: hooks run at least once, and act only by
// keyed task operations (a second run repeats them harmlessly).

// Defaults of EventsConfig.
const (
	EventsPerPassDefault = 100
	EventRetryDefault    = 30 * time.Second
	// kfPagesPerEvent bounds the kf/sync_msg pages one event fetches
	// (1000 messages each); the rest waits for the next event.
	kfPagesPerEvent = 50
)

// EventsConfig configures the event loop.
type EventsConfig struct {
	// KfSyncFunc fetches 微信客服 messages (kf/sync_msg); nil: kf events
	// are marked handled with a warning.
	KfSyncFunc engine.KfSyncFunc
	// EventRetry is how soon an event whose handling failed (kf/sync_msg
	// unreachable, a proposal lost) is tried again; default
	// EventRetryDefault.
	EventRetry time.Duration
	// EventRetention: handled events are forgotten this long after they
	// were recorded (at each prune); default engine.EventRetentionDefault.
	EventRetention time.Duration
}

func (c *EventsConfig) setDefaults() {
	setDefault(&c.EventRetry, EventRetryDefault)
	setDefault(&c.EventRetention, engine.EventRetentionDefault)
}

type eventLoop struct {
	l *Leader
	// retry holds events whose handling failed, until when they wait;
	// cardNext card updates answered retryable (cards.go).
	retry    map[string]time.Time
	cardNext map[string]time.Time
}

func newEventLoop(l *Leader) *eventLoop {
	return &eventLoop{l: l, retry: map[string]time.Time{}, cardNext: map[string]time.Time{}}
}

func (e *eventLoop) run(ctx context.Context) {
	e.l.untilDone(ctx, e.runOnce)
}

// runOnce handles the events waiting now and returns when to look again.
func (e *eventLoop) runOnce(ctx context.Context) time.Time {
	l := e.l
	now := l.now()
	wake := e.updateCards(ctx, now)
	var done []string
	for _, ev := range l.cfg.FSM.UnhandledEvents(EventsPerPassDefault) {
		if ctx.Err() != nil {
			return wake
		}
		if at, ok := e.retry[ev.ID]; ok && now.Before(at) {
			wake = earliest(wake, at)
			continue
		}
		if err := e.handle(ctx, ev); err != nil {
			if ctx.Err() != nil {
				return wake // cut short by the end of leadership: the next leader handles it
			}
			l.log.Warn("event not handled; trying again", "event", ev.ID, "type", ev.Type, "in", l.cfg.EventRetry, "err", err)
			e.retry[ev.ID] = now.Add(l.cfg.EventRetry)
			wake = earliest(wake, e.retry[ev.ID])
			continue
		}
		delete(e.retry, ev.ID)
		done = append(done, ev.ID)
	}
	if len(done) > 0 {
		if _, err := l.propose(ctx, engine.CmdEventsHandled, engine.EventsHandled{IDs: done, Now: l.now()}); err != nil {
			l.log.Warn("cannot mark events handled; their hooks will run again", "events", len(done), "err", err)
		}
	}
	return wake
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// handle handles one event; an error leaves it for a later pass.
func (e *eventLoop) handle(ctx context.Context, ev *engine.Event) error {
	switch ev.Type {
	case engine.EventWecomKfNotify:
		if err := e.syncKf(ctx, ev); err != nil {
			return err
		}
	case engine.EventWecomCard:
		if err := e.cardClick(ctx, ev); err != nil {
			return err
		}
	}
	return e.runHooks(ctx, ev)
}

// runHooks runs on_event of every rule that takes ev's type. A hook that
// fails raises an alert (the event still counts as handled: running it
// again would fail again); only the end of leadership stops it.
func (e *eventLoop) runHooks(ctx context.Context, ev *engine.Event) error {
	l := e.l
	er, ok := l.cfg.Rules.(engine.EventRules)
	if !ok {
		return nil
	}
	evc := engine.EventContext{ID: ev.ID, Type: ev.Type, At: ev.At, Data: ev.Data}
	ops := e.taskOps()
	for _, r := range l.cfg.Rules.Rules() {
		if !slices.Contains(r.Events, ev.Type) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, l.cfg.PlanTimeout)
		err := er.OnEvent(cctx, r.Name, evc, ops)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			l.log.Warn("rule's on_event failed", "rule", r.Name, "event", ev.ID, "err", err)
			l.raise(ctx, engine.NewRaiseAlert(engine.AlertCause{Kind: engine.AlertEventError, Subject: r.Name}, r.Name,
				engine.AlertParams{Error: err.Error()},
				fmt.Sprintf("on_event of rule %s failed for event %s (%s): %v", r.Name, ev.ID, ev.Type, err), l.now()))
		}
	}
	return nil
}

// taskOps are the task operations of on_event, each stamped with the
// leader's clock.
func (e *eventLoop) taskOps() engine.TaskOps {
	l := e.l
	return engine.TaskOps{
		Submit: func(ctx context.Context, t engine.SubmitTask) (*engine.Task, error) {
			t.Now = l.now()
			res, err := l.propose(ctx, engine.CmdSubmitTask, t)
			if err != nil {
				return nil, err
			}
			return res.(engine.SubmitResult).Task, nil
		},
		Cancel: func(ctx context.Context, key string) (*engine.Task, error) {
			res, err := l.propose(ctx, engine.CmdCancelTask, engine.CancelTask{Key: key, Now: l.now()})
			if err != nil {
				return nil, err
			}
			return res.(engine.CancelResult).Task, nil
		},
		Replace: func(ctx context.Context, c engine.ReplaceTask) (*engine.Task, error) {
			c.Now = l.now()
			res, err := l.propose(ctx, engine.CmdReplaceTask, c)
			if err != nil {
				return nil, err
			}
			return res.(engine.ReplaceResult).Task, nil
		},
		Pending: l.cfg.FSM.PendingTasks,
	}
}

// kfNotify is the data of a kf_msg_or_event callback.
type kfNotify struct {
	Token    string `json:"Token"`
	OpenKfID string `json:"OpenKfId"`
}

// syncKf fetches the messages a kf_msg_or_event announces, from the
// cursor in the state, and records each page with its next cursor in one
// command (KfSynced): a message becomes one wecom.kf.message event, id
// "wecom:CHANNEL:kf:MSGID", whichever leader fetched it and however often.
func (e *eventLoop) syncKf(ctx context.Context, ev *engine.Event) error {
	l := e.l
	var n kfNotify
	if err := json.Unmarshal(ev.Data, &n); err != nil || n.OpenKfID == "" {
		l.log.Warn("kf_msg_or_event without OpenKfId; ignored", "event", ev.ID)
		return nil
	}
	channel, ok := strings.CutPrefix(ev.Source, "wecom:")
	if !ok {
		return nil // a kf event posted to /v1/events: nothing to fetch
	}
	if l.cfg.KfSyncFunc == nil {
		l.log.Warn("kf_msg_or_event but no kf/sync_msg client on this node", "channel", channel)
		return nil
	}
	cursor := l.cfg.FSM.KfCursor(channel, n.OpenKfID)
	for range kfPagesPerEvent {
		page, err := l.cfg.KfSyncFunc(ctx, channel, n.OpenKfID, n.Token, cursor)
		if err != nil {
			return fmt.Errorf("kf/sync_msg for %s: %w", n.OpenKfID, err)
		}
		c := engine.KfSynced{Channel: channel, OpenKfID: n.OpenKfID, Cursor: page.NextCursor, Now: l.now()}
		if c.Cursor == "" {
			c.Cursor = cursor
		}
		for _, m := range page.Messages {
			c.Events = append(c.Events, engine.NewEvent{ID: "wecom:" + channel + ":kf:" + m.ID, Type: engine.EventWecomKfMessage, Source: ev.Source, Data: m.Data})
		}
		if _, err := l.propose(ctx, engine.CmdKfSynced, c); err != nil {
			return err
		}
		if !page.HasMore || c.Cursor == cursor {
			return nil
		}
		cursor = c.Cursor
	}
	return nil
}

// pruneEvents forgets handled events past retention (from the
// housekeeper's prune).
func (l *Leader) pruneEvents(ctx context.Context, now time.Time) {
	if l.cfg.FSM.EventCount() == 0 {
		return
	}
	res, err := l.propose(ctx, engine.CmdPruneEvents, engine.PruneEvents{Before: now.Add(-l.cfg.EventRetention), Now: now})
	if err != nil {
		l.log.Warn("cannot prune handled events", "err", err)
		return
	}
	if n := res.(int); n > 0 {
		l.log.Info("pruned handled events past retention", "events", n, "retention", l.cfg.EventRetention)
	}
}
