package engine

import (
	"cmp"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"encoding/json"

	"github.com/google/btree"
)

// Events: what other systems tell Herald (a WeCom callback, a customer's
// message through 微信客服, POST /v1/events). An event is replicated once by
// its id, however often it arrives and at however many nodes; the leader
// then runs the rules' on_event hooks for it (engine/leader/events.go) and
// marks it handled. Hooks run at least once, so they act only through
// keyed task operations.

// Event types Herald raises itself. Others come from POST /v1/events.
const (
	// EventWecomKfNotify is WeCom's kf_msg_or_event callback: only a
	// sync token; the leader fetches the messages (kf/sync_msg) and raises
	// one EventWecomKfMessage per message.
	EventWecomKfNotify = "wecom.kf_msg_or_event"
	// EventWecomKfMessage is one 微信客服 message, data as WeCom's JSON
	// names it (msgid, open_kfid, external_userid, origin, …).
	EventWecomKfMessage = "wecom.kf.message"
	// EventWecomCard is a template card click (template_card_event).
	EventWecomCard = "wecom.template_card_event"
	// EventWecomExternalContact is change_external_contact.
	EventWecomExternalContact = "wecom.change_external_contact"
)

// Limits of events, shared by the API and the callback receiver.
const (
	// MaxEventID bounds an event id in bytes.
	MaxEventID = 256
	// MaxEventType bounds an event type in bytes.
	MaxEventType = 128
	// MaxEventData bounds an event's data (JSON) in bytes.
	MaxEventData = 64 << 10
	// EventCap bounds the events the state holds. At the cap the oldest
	// handled event is forgotten for a new one; with none handled, new
	// events are refused (ErrEventBacklog). A constant: every node must
	// forget the same.
	EventCap = 100_000
	// EventWaitingBytes bounds the data of the events not handled yet; a
	// handled event keeps only its id, type and times.
	EventWaitingBytes = 64 << 20
	// EventRetentionDefault is how long a handled event's id is kept, so
	// that WeCom's retries (minutes) and a late second delivery are still
	// recognised.
	EventRetentionDefault = 7 * 24 * time.Hour
)

// Errors of the event commands.
var (
	ErrEventInvalid = errors.New("invalid event")
	ErrEventBacklog = errors.New("too many events wait to be handled")
)

// Event is a replicated event. Records are never mutated.
type Event struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	// Source is "api" (POST /v1/events) or "wecom:CHANNEL".
	Source string          `json:"source"`
	Data   json.RawMessage `json:"data"`
	// At is when it was recorded (the recording node's clock).
	At        time.Time `json:"at"`
	Handled   bool      `json:"handled"`
	HandledAt time.Time `json:"handled_at,omitzero"`
}

// NewEvent is one event in a command body.
type NewEvent struct {
	ID     string          `json:"id"`
	Type   string          `json:"type"`
	Source string          `json:"source"`
	Data   json.RawMessage `json:"data"`
}

// RecordEvent (CmdRecordEvent) records an event unless its id is known.
type RecordEvent struct {
	NewEvent
	Now time.Time `json:"now"`
}

// RecordEventResult is what Apply returns for CmdRecordEvent.
type RecordEventResult struct {
	Event   *Event
	Created bool // false: the id was known (the stored event is returned)
}

// EventsHandled (CmdEventsHandled) marks events handled: their hooks ran.
type EventsHandled struct {
	IDs []string  `json:"ids"`
	Now time.Time `json:"now"`
}

// KfSynced (CmdKfSynced) records one page of kf/sync_msg: its messages as
// events and the cursor after them, in one entry, so a leader that dies
// in between leaves neither a message without its cursor nor the reverse.
type KfSynced struct {
	Channel  string     `json:"channel"`
	OpenKfID string     `json:"open_kfid"`
	Cursor   string     `json:"cursor"`
	Events   []NewEvent `json:"events"`
	Now      time.Time  `json:"now"`
}

// PruneEvents (CmdPruneEvents) forgets handled events recorded before
// Before.
type PruneEvents struct {
	Before time.Time `json:"before"`
	Now    time.Time `json:"now"`
}

// eventState is the events' part of the state.
type eventState struct {
	// byID holds every event kept; order all of them by (At, ID) and
	// waiting the unhandled ones (both derived, rebuilt on restore).
	byID    map[string]*Event
	order   *btree.BTreeG[dueItem]
	waiting *btree.BTreeG[dueItem]
	// waitingBytes is the data held by the unhandled events (derived).
	waitingBytes int
	// kf is the kf/sync_msg cursor per "CHANNEL/OPEN_KFID".
	kf map[string]string
}

func newEventState() eventState {
	return eventState{byID: map[string]*Event{}, order: btree.NewG(32, dueLess), waiting: btree.NewG(32, dueLess), kf: map[string]string{}}
}

func (e *eventState) clone() eventState {
	return eventState{byID: maps.Clone(e.byID), kf: maps.Clone(e.kf)}
}

func (e *eventState) reindex() {
	e.order, e.waiting, e.waitingBytes = btree.NewG(32, dueLess), btree.NewG(32, dueLess), 0
	for id, ev := range e.byID {
		e.order.ReplaceOrInsert(newDue(ev.At, id))
		if !ev.Handled {
			e.waiting.ReplaceOrInsert(newDue(ev.At, id))
			e.waitingBytes += len(ev.Data)
		}
	}
}

func (e *eventState) put(ev *Event) {
	if old, ok := e.byID[ev.ID]; ok {
		e.remove(old)
	}
	e.byID[ev.ID] = ev
	e.order.ReplaceOrInsert(newDue(ev.At, ev.ID))
	if !ev.Handled {
		e.waiting.ReplaceOrInsert(newDue(ev.At, ev.ID))
		e.waitingBytes += len(ev.Data)
	}
}

func (e *eventState) remove(ev *Event) {
	delete(e.byID, ev.ID)
	e.order.Delete(newDue(ev.At, ev.ID))
	if _, ok := e.waiting.Delete(newDue(ev.At, ev.ID)); ok {
		e.waitingBytes -= len(ev.Data)
	}
}

// CheckEvent is the one check of an event's id, type and data.
func CheckEvent(ev NewEvent) error {
	switch {
	case ev.ID == "" || len(ev.ID) > MaxEventID || !utf8.ValidString(ev.ID):
		return fmt.Errorf("%w: id is required, at most %d bytes of UTF-8", ErrEventInvalid, MaxEventID)
	case ev.Type == "" || len(ev.Type) > MaxEventType || !utf8.ValidString(ev.Type):
		return fmt.Errorf("%w: type is required, at most %d bytes of UTF-8", ErrEventInvalid, MaxEventType)
	case len(ev.Data) > MaxEventData:
		return fmt.Errorf("%w: data is %d bytes, over the %d byte limit", ErrEventInvalid, len(ev.Data), MaxEventData)
	}
	return nil
}

// record stores ev unless its id is known; ok false with err: refused.
func (a applier) recordEvent(ev NewEvent, now time.Time) (RecordEventResult, error) {
	if err := CheckEvent(ev); err != nil {
		return RecordEventResult{}, err
	}
	es := &a.st.Events
	if old, ok := es.byID[ev.ID]; ok {
		return RecordEventResult{Event: old}, nil
	}
	if len(es.byID) >= EventCap {
		var oldest *Event
		es.order.Ascend(func(it dueItem) bool {
			if e := es.byID[it.id]; e.Handled {
				oldest = e
				return false
			}
			return true
		})
		if oldest == nil {
			return RecordEventResult{}, fmt.Errorf("%w: %d events are not handled yet (is a rule's on_event failing?)", ErrEventBacklog, len(es.byID))
		}
		es.remove(oldest)
	}
	data := ev.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	if es.waitingBytes+len(data) > EventWaitingBytes {
		return RecordEventResult{}, fmt.Errorf("%w: %d bytes of events are not handled yet (is a rule's on_event failing?)", ErrEventBacklog, es.waitingBytes)
	}
	e := &Event{ID: ev.ID, Type: ev.Type, Source: ev.Source, Data: data, At: now}
	es.put(e)
	return RecordEventResult{Event: e, Created: true}, nil
}

func (a applier) recordEventCmd(c RecordEvent) any {
	a.stamp(c.Now)
	res, err := a.recordEvent(c.NewEvent, c.Now)
	if err != nil {
		return err
	}
	return res
}

func (a applier) eventsHandled(c EventsHandled) any {
	a.stamp(c.Now)
	n := 0
	for _, id := range c.IDs {
		if ev, ok := a.st.Events.byID[id]; ok && !ev.Handled {
			ne := *ev
			// The id is what a duplicate is recognised by; the data is
			// no longer needed.
			ne.Handled, ne.HandledAt, ne.Data = true, c.Now, nil
			a.st.Events.put(&ne)
			n++
		}
	}
	return n
}

// KfCursorKey is the key of a kf cursor in the state.
func KfCursorKey(channel, openKfID string) string { return channel + "/" + openKfID }

func (a applier) kfSynced(c KfSynced) any {
	a.stamp(c.Now)
	if c.Channel == "" || c.OpenKfID == "" {
		return fmt.Errorf("%w: kf sync: channel and open_kfid are required", ErrEventInvalid)
	}
	for _, ev := range c.Events {
		if err := CheckEvent(ev); err != nil {
			return err
		}
	}
	created := 0
	for i, ev := range c.Events {
		// The i-th message is recorded i nanoseconds after the page's
		// time: events are handled by (time, id), and a page must keep
		// WeCom's order (a customer's message, then the reply to it).
		res, err := a.recordEvent(ev, c.Now.Add(time.Duration(i)))
		if err != nil {
			return err // the cursor stays: the page is fetched again
		}
		if res.Created {
			created++
		}
	}
	a.st.Events.kf[KfCursorKey(c.Channel, c.OpenKfID)] = c.Cursor
	return created
}

func (a applier) pruneEvents(c PruneEvents) any {
	a.stamp(c.Now)
	if err := a.horizonAhead(CmdPruneEvents, c.Now, c.Before); err != nil {
		return err
	}
	es := &a.st.Events
	var gone []*Event
	before := newDue(c.Before, "")
	es.order.Ascend(func(it dueItem) bool {
		if !dueLess(it, before) {
			return false
		}
		if e := es.byID[it.id]; e.Handled {
			gone = append(gone, e)
		}
		return true
	})
	for _, e := range gone {
		es.remove(e)
	}
	return len(gone)
}

// Event returns the event with id, if kept.
func (f *FSM) Event(id string) (*Event, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	e, ok := f.st.Events.byID[id]
	return e, ok
}

// UnhandledEvents returns up to limit events not handled yet, oldest first.
func (f *FSM) UnhandledEvents(limit int) []*Event {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*Event
	f.st.Events.waiting.Ascend(func(it dueItem) bool {
		if len(out) >= limit {
			return false
		}
		out = append(out, f.st.Events.byID[it.id])
		return true
	})
	return out
}

// EventCount is how many events the state keeps.
func (f *FSM) EventCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.st.Events.byID)
}

// KfCursor is the kf/sync_msg cursor of a channel's 微信客服 account.
func (f *FSM) KfCursor(channel, openKfID string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.Events.kf[KfCursorKey(channel, openKfID)]
}

// eventEntry and kfEntry are the snapshot's records of events.
type kfEntry struct {
	Key, Cursor string
}

// FSMEvents is the FSM version that first applied the event commands: a
// snapshot holding events or kf cursors needs it (snapshotFSM).
const FSMEvents uint16 = 4

func hasEvents(st *state) bool { return len(st.Events.byID) > 0 || len(st.Events.kf) > 0 }

// writeEvents writes the events and kf cursors, only when there are any,
// so a version-3 member still takes the snapshot otherwise.
func writeEvents(enc *gob.Encoder, st *state) error {
	if !hasEvents(st) {
		return nil
	}
	evs := make([]*Event, 0, len(st.Events.byID))
	for _, id := range slices.Sorted(maps.Keys(st.Events.byID)) {
		evs = append(evs, st.Events.byID[id])
	}
	kf := make([]kfEntry, 0, len(st.Events.kf))
	for _, k := range slices.Sorted(maps.Keys(st.Events.kf)) {
		kf = append(kf, kfEntry{Key: k, Cursor: st.Events.kf[k]})
	}
	return cmp.Or(writeSection(enc, "events", evs), writeSection(enc, "kf_cursors", kf))
}

// EventContext is an event as a rule's on_event sees it (ev).
type EventContext struct {
	ID   string
	Type string
	At   time.Time
	Data json.RawMessage
}

// TaskOps are the task operations a rule's on_event may call; the leader
// stamps Now into each.
type TaskOps struct {
	Submit  SubmitFunc
	Cancel  func(ctx context.Context, key string) (*Task, error)
	Replace func(ctx context.Context, c ReplaceTask) (*Task, error)
	// Pending lists pending tasks by key prefix (task.pending).
	Pending func(prefix string, limit int) []*Task
}

// EventRules is a RuleSource that runs rules' on_event hooks. Rule.Events
// names the event types each rule takes.
type EventRules interface {
	OnEvent(ctx context.Context, rule string, ev EventContext, ops TaskOps) error
}

// KfMessage is one message of a kf/sync_msg page: its msgid and the
// message object as WeCom wrote it.
type KfMessage struct {
	ID   string
	Data json.RawMessage
}

// KfPage is one kf/sync_msg answer.
type KfPage struct {
	NextCursor string
	HasMore    bool
	Messages   []KfMessage
}

// KfSyncFunc calls kf/sync_msg for a channel's 微信客服 account (cmd/herald
// implements it with the channel's credentials). token is the callback's
// (valid 10 minutes; may be empty).
type KfSyncFunc func(ctx context.Context, channel, openKfID, token, cursor string) (KfPage, error)
