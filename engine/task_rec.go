package engine

import (
	"encoding/json"
	"iter"
	"math"
	"time"
	"unique"
	"unsafe"
)

// taskRec is how the state holds an API task: a pending task as its key
// and data in one string (the map's key is a substring of it, so the key
// is held once), its rule and two instants: 64 bytes and one allocation
// for key and data, where a Task is 176 and two. Pending tasks
// are what piles up (ten million waiting on every node is a shape the
// README sizes for); a task that fired or was cancelled, or has an alert,
// or an instant this form cannot give back exactly, is held whole in full.
//
// The form is invisible: taskMap gives back a Task equal (== on every
// field, reflect.DeepEqual) to the one it was given, instants with their
// location included, so Apply, queries and snapshots see what they saw
// before. Records are replaced, never mutated, so a Task made for a read
// can be handed out.
type taskRec struct {
	full *Task

	// kd is the key, then the data (none: nil data); keyLen ends the key.
	kd     string
	rule   unique.Handle[string]
	keyLen uint32
	// dueAt, submittedAt: Unix nanoseconds, in the zone their zone
	// fields name (packZoned).
	dueZone, submittedZone int32
	dueAt, submittedAt     int64
}

// Zones of a packed instant besides a fixed offset in seconds (the
// location time.Parse gives an RFC 3339 offset: FixedZone("", offset),
// one shared Location for a whole hour).
const (
	zoneUTC   = math.MinInt32
	zoneLocal = math.MinInt32 + 1
)

// packZoned is t as a taskRec holds it, and false when it cannot be given
// back exactly: the zero time, a monotonic reading, an instant outside
// the nanoseconds' range, or a location other than UTC, Local or an
// unnamed whole-hour offset.
func packZoned(t time.Time) (n int64, zone int32, ok bool) {
	if t.IsZero() {
		return 0, 0, false
	}
	n = t.UnixNano()
	switch loc := t.Location(); {
	case loc == time.UTC:
		zone = zoneUTC
	case loc == time.Local:
		zone = zoneLocal
	default:
		_, off := t.Zone()
		zone = int32(off)
	}
	return n, zone, t == unpackZoned(n, zone)
}

func unpackZoned(n int64, zone int32) time.Time {
	t := time.Unix(0, n)
	switch zone {
	case zoneUTC:
		return t.UTC()
	case zoneLocal:
		return t.In(time.Local)
	}
	return t.In(time.FixedZone("", int(zone)))
}

// compactTask is t as the state holds it.
func compactTask(t *Task) *taskRec {
	// Data empty but not nil would come back nil; a key past 4 GiB is
	// refused long before (CheckTaskKey).
	if t.State != TaskPending || t.Alert != "" || !t.FiredAt.IsZero() || !t.CancelledAt.IsZero() ||
		(t.Data != nil && len(t.Data) == 0) || len(t.Key) > math.MaxUint32 {
		return &taskRec{full: t}
	}
	due, dz, ok1 := packZoned(t.DueAt)
	sub, sz, ok2 := packZoned(t.SubmittedAt)
	if !ok1 || !ok2 {
		return &taskRec{full: t}
	}
	return &taskRec{kd: t.Key + string(t.Data), keyLen: uint32(len(t.Key)), rule: unique.Make(t.Rule),
		dueAt: due, submittedAt: sub, dueZone: dz, submittedZone: sz}
}

// key is the task's key.
func (r *taskRec) key() string {
	if r.full != nil {
		return r.full.Key
	}
	return r.kd[:r.keyLen]
}

// task is the Task r holds.
func (r *taskRec) task() *Task {
	if r.full != nil {
		return r.full
	}
	var data json.RawMessage
	if len(r.kd) > int(r.keyLen) {
		// The record's own bytes, as Data always was, not a copy: a
		// listing reads every task it passes (64 KiB of data each at
		// most). Nothing writes a Task's Data.
		d := r.kd[r.keyLen:]
		data = unsafe.Slice(unsafe.StringData(d), len(d)) // cap is len: an append copies
	}
	return &Task{Key: r.key(), Rule: r.rule.Value(), DueAt: unpackZoned(r.dueAt, r.dueZone), Data: data,
		State: TaskPending, SubmittedAt: unpackZoned(r.submittedAt, r.submittedZone)}
}

// The fields the scans over every task read, without making a Task.

func (r *taskRec) state() TaskState {
	if r.full != nil {
		return r.full.State
	}
	return TaskPending
}

func (r *taskRec) due() time.Time {
	if r.full != nil {
		return r.full.DueAt
	}
	return unpackZoned(r.dueAt, r.dueZone)
}

// taskMap is the state's tasks by key: a cowMap of taskRecs that takes
// and gives Tasks, with cowMap's methods.
type taskMap struct{ m cowMap[*taskRec] }

func (c *taskMap) Get(k string) (*Task, bool) {
	r, ok := c.m.Get(k)
	if !ok {
		return nil, false
	}
	return r.task(), true
}

// At returns the task k, or nil.
func (c *taskMap) At(k string) *Task {
	t, _ := c.Get(k)
	return t
}

func (c *taskMap) Has(k string) bool { return c.m.Has(k) }
func (c *taskMap) Len() int          { return c.m.Len() }

func (c *taskMap) Delete(k string) { c.m.Delete(k) }

// Set stores t as k and returns the key it is stored by: for a compact
// record (k is t's key) the record's own copy, which an index should hold
// rather than k, so that the key's bytes are held once.
func (c *taskMap) Set(k string, t *Task) string {
	r := compactTask(t)
	if r.full == nil && k == t.Key {
		k = r.key()
	}
	c.m.Set(k, r)
	return k
}
func (c *taskMap) reserve(n int)                        { c.m.reserve(n) }
func (c *taskMap) freeze() taskMap                      { return taskMap{c.m.freeze()} }
func (c *taskMap) records() iter.Seq2[string, *taskRec] { return c.m.All() }

// record is the record of task k, or nil.
func (c *taskMap) record(k string) *taskRec { return c.m.At(k) }

// All yields every task, in no particular order; as cowMap.All, the
// caller may delete only the entry yielded. Each is made for the read:
// a scan that only filters reads records() instead.
func (c *taskMap) All() iter.Seq2[string, *Task] {
	return func(yield func(string, *Task) bool) {
		for k, r := range c.m.All() {
			if !yield(k, r.task()) {
				return
			}
		}
	}
}

// Values yields every task, in no particular order.
func (c *taskMap) Values() iter.Seq[*Task] {
	return func(yield func(*Task) bool) {
		for _, t := range c.All() {
			if !yield(t) {
				return
			}
		}
	}
}

// toMap copies the tasks into a plain map (the version-1 snapshot and
// tests).
func (c *taskMap) toMap() map[string]*Task {
	out := make(map[string]*Task, c.Len())
	for k, t := range c.All() {
		out[k] = t
	}
	return out
}

// fromMap sets every task of m.
func (c *taskMap) fromMap(m map[string]*Task) {
	for k, t := range m {
		c.Set(k, t)
	}
}
