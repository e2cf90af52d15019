package engine

import (
	"encoding/json"
	"iter"
	"math"
	"time"
	"unique"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// deliveryRec is how the state holds a delivery: the fields a planned,
// sent or expired delivery has, with its instants as Unix nanoseconds,
// 144 bytes where a Delivery is 512; the fields every delivery of a run
// shares (its run, rule, channel, slot, priority, retries) are one
// runFields handle (unique), not copied into each. A delivery that has more (a claim's
// lease, failures, a retry by hand, a digest, a recall, clicks) or an
// instant this form cannot give back exactly (not UTC, a monotonic
// reading, outside 1678–2262) is held whole in full instead. Every
// delivery of a run lives on every node until retention prunes it: a
// million planned deliveries were 512 MB of records on each node.
//
// The form is invisible: deliveryMap gives back a Delivery equal
// (reflect.DeepEqual) to the one it was given, so Apply, queries and
// snapshots see what they saw before. Records are replaced, never
// mutated, so a Delivery made for a read can be handed out.
type deliveryRec struct {
	full *Delivery

	id, recipient, providerID string
	payload                   json.RawMessage
	run                       unique.Handle[runFields]
	// notBefore, deadline, sentAt, endedAt: noInstant for the zero time.
	notBefore, deadline, sentAt, endedAt int64
	attempts                             int32
	claimSeq                             int32 // a settled claim's sequence; 0: no claim
	state                                DeliveryState
}

// runFields are the fields of a deliveryRec its run's deliveries share.
// A handle is 8 bytes where the fields were 80 in every record: a
// million deliveries of one run hold one copy of them.
type runFields struct {
	runKey, rule, channel string
	retry                 string // as the log packs it (packRetry): a slice is not comparable
	slot                  int64  // noInstant for the zero time
	priority              heraldtype.Priority
	noRetry               bool
}

// noRetryList is a nil retry list as packRetry writes it.
var noRetryList = string(packRetry(nil, nil))

func (f *runFields) retries() []time.Duration {
	if f.retry == noRetryList {
		return nil // the default: nothing to make
	}
	r := packReader{b: []byte(f.retry)}
	return r.retry()
}

// noInstant stands for the zero time in a deliveryRec. The instant it
// would be (1677-09-21) is held in full.
const noInstant = math.MinInt64

// packInstant is t as a deliveryRec holds it, and false when it cannot
// be given back exactly.
func packInstant(t time.Time) (int64, bool) {
	if t == (time.Time{}) {
		return noInstant, true
	}
	n := t.UnixNano()
	// Equal as a struct, not only as an instant: UTC (no location), no
	// monotonic reading, within the range of nanoseconds.
	return n, n != noInstant && t == time.Unix(0, n).UTC()
}

func unpackInstant(n int64) time.Time {
	if n == noInstant {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// compactDelivery is d as the state holds it.
func compactDelivery(d *Delivery) *deliveryRec {
	if r, ok := packDelivery(d); ok {
		return r
	}
	return &deliveryRec{full: d}
}

// compactCopy is compactDelivery for a d the caller goes on to own (one
// on its stack): a copy of it is held whole when it must be.
func compactCopy(d *Delivery) *deliveryRec {
	if r, ok := packDelivery(d); ok {
		return r
	}
	c := *d
	return &deliveryRec{full: &c}
}

func packDelivery(d *Delivery) (*deliveryRec, bool) {
	if d.NextAt != (time.Time{}) || d.Code != "" || d.LastError != "" || d.Retries != 0 || d.RetriedBy != "" ||
		d.RetriedAt != (time.Time{}) || d.RetryNote != "" || d.Failures != nil || d.Digest != "" ||
		d.Members != nil || d.Recall != nil || d.Clicks != nil ||
		d.Attempts < 0 || d.Attempts > math.MaxInt32 {
		return nil, false
	}
	slot, ok := packInstant(d.Slot)
	if !ok {
		return nil, false
	}
	run := runFields{runKey: d.RunKey, rule: d.Rule, channel: d.Channel, retry: noRetryList, slot: slot,
		priority: d.Priority, noRetry: d.NoRetry}
	if d.Retry != nil {
		var buf [64]byte
		run.retry = string(packRetry(buf[:0], d.Retry))
	}
	r := &deliveryRec{id: d.ID, recipient: d.Recipient, providerID: d.ProviderID, payload: d.Payload,
		run: unique.Make(run), attempts: int32(d.Attempts), state: d.State}
	if c := d.Claim; c != nil {
		// Only a settled claim (the sequence, no lease), as settledClaim
		// makes: a delivery claimed now is held whole.
		if c.Seq < 1 || c.Seq > math.MaxInt32 || *c != (Claim{Seq: c.Seq}) {
			return nil, false
		}
		r.claimSeq = int32(c.Seq)
	}
	for _, x := range [...]struct {
		dst *int64
		t   time.Time
	}{{&r.notBefore, d.NotBefore}, {&r.deadline, d.Deadline}, {&r.sentAt, d.SentAt}, {&r.endedAt, d.EndedAt}} {
		var fits bool
		*x.dst, fits = packInstant(x.t)
		ok = ok && fits
	}
	return r, ok
}

// delivery is the Delivery r holds.
func (r *deliveryRec) delivery() *Delivery {
	if r.full != nil {
		return r.full
	}
	run := r.run.Value()
	d := &Delivery{ID: r.id, RunKey: run.runKey, Rule: run.rule, Slot: unpackInstant(run.slot), Recipient: r.recipient,
		Channel: run.channel, Payload: r.payload, Priority: run.priority, NotBefore: unpackInstant(r.notBefore),
		Deadline: unpackInstant(r.deadline), Retry: run.retries(), NoRetry: run.noRetry, State: r.state,
		Attempts: int(r.attempts), ProviderID: r.providerID, SentAt: unpackInstant(r.sentAt),
		EndedAt: unpackInstant(r.endedAt)}
	if r.claimSeq > 0 {
		d.Claim = settledClaim(int(r.claimSeq))
	}
	return d
}

// deliveryMap is the state's deliveries by id: a cowMap of deliveryRecs
// that takes and gives Deliveries, with cowMap's methods.
type deliveryMap struct{ m cowMap[*deliveryRec] }

func (c *deliveryMap) Get(k string) (*Delivery, bool) {
	r, ok := c.m.Get(k)
	if !ok {
		return nil, false
	}
	return r.delivery(), true
}

// Mine returns delivery k for the caller to change and store: made
// for this read from a compact record, a copy of a whole one. An
// applier that replaces a delivery reads it so (one Delivery made, not
// a read and a copy).
func (c *deliveryMap) Mine(k string) (*Delivery, bool) {
	r, ok := c.m.Get(k)
	switch {
	case !ok:
		return nil, false
	case r.full != nil:
		d := *r.full
		return &d, true
	}
	return r.delivery(), true
}

// At returns the delivery k, or nil.
func (c *deliveryMap) At(k string) *Delivery {
	d, _ := c.Get(k)
	return d
}

func (c *deliveryMap) Has(k string) bool                        { return c.m.Has(k) }
func (c *deliveryMap) Len() int                                 { return c.m.Len() }
func (c *deliveryMap) Set(k string, d *Delivery)                { c.m.Set(k, compactDelivery(d)) }
func (c *deliveryMap) Delete(k string)                          { c.m.Delete(k) }
func (c *deliveryMap) Keys() iter.Seq[string]                   { return c.m.Keys() }
func (c *deliveryMap) reserve(n int)                            { c.m.reserve(n) }
func (c *deliveryMap) freeze() deliveryMap                      { return deliveryMap{c.m.freeze()} }
func (c *deliveryMap) records() iter.Seq2[string, *deliveryRec] { return c.m.All() }
func (c *deliveryMap) recordValues() iter.Seq[*deliveryRec]     { return c.m.Values() }

// All yields every delivery, in no particular order; as cowMap.All, the
// caller may delete only the entry yielded. Each is made for the read:
// a scan that only filters reads records() instead.
func (c *deliveryMap) All() iter.Seq2[string, *Delivery] {
	return func(yield func(string, *Delivery) bool) {
		for k, r := range c.m.All() {
			if !yield(k, r.delivery()) {
				return
			}
		}
	}
}

// Values yields every delivery, in no particular order.
func (c *deliveryMap) Values() iter.Seq[*Delivery] {
	return func(yield func(*Delivery) bool) {
		for _, d := range c.All() {
			if !yield(d) {
				return
			}
		}
	}
}

// toMap copies the deliveries into a plain map (the version-1 snapshot
// and tests).
func (c *deliveryMap) toMap() map[string]*Delivery {
	out := make(map[string]*Delivery, c.Len())
	for k, d := range c.All() {
		out[k] = d
	}
	return out
}

// fromMap sets every delivery of m.
func (c *deliveryMap) fromMap(m map[string]*Delivery) {
	for k, d := range m {
		c.Set(k, d)
	}
}

// The fields the scans over every delivery filter on, read without
// making a Delivery.

func (r *deliveryRec) getID() string {
	if r.full != nil {
		return r.full.ID
	}
	return r.id
}

func (r *deliveryRec) getState() DeliveryState {
	if r.full != nil {
		return r.full.State
	}
	return r.state
}

func (r *deliveryRec) getRule() string {
	if r.full != nil {
		return r.full.Rule
	}
	return r.run.Value().rule
}

func (r *deliveryRec) getRecipient() string {
	if r.full != nil {
		return r.full.Recipient
	}
	return r.recipient
}

func (r *deliveryRec) endedBefore(t time.Time) bool {
	if r.full != nil {
		return r.full.EndedAt.Before(t)
	}
	return unpackInstant(r.endedAt).Before(t)
}
