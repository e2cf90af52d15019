package engine

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"iter"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/btree"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// state is the replicated state. Only Apply and Restore write it, under
// the FSM's lock; records are replaced, never mutated (see record.go).
//
// Runs, deliveries, tasks and the ledger, which grow with the traffic,
// are cowMaps: a snapshot captures them in constant time (see clone).
type state struct {
	Runs       cowMap[*Run]
	Deliveries deliveryMap
	Cursors    map[string]time.Time
	Members    map[string]Member
	Alerts     map[string]*Alert
	// Missed maps rule → recipient → earlier slots (RFC 3339) whose delivery
	// finally failed and has not been made good by a later sent one.
	Missed map[string]map[string][]string
	// Tasks are the API tasks by key.
	Tasks taskMap
	// Ledger remembers the run keys of runs pruned by retention, with
	// their slot (or the time they fired, if later), so that a slot or a
	// task key never fires twice.
	Ledger cowMap[time.Time]
	// Compensate holds the ids of deliveries that ended failed or expired
	// and whose rule's on_failed has not run yet.
	Compensate map[string]bool
	// Paused holds the paused rules (PauseRule); their pending deliveries
	// are left out of the due index until ResumeRule.
	Paused map[string]*Pause
	// Daily keeps per date (in the run's zone) and rule the aggregates
	// that outlive pruned deliveries.
	Daily map[string]map[string]*DayStats
	// Directory is the directory snapshot in force (directory.go);
	// DirectoryHeld a refresh held for an operator's confirmation. Both
	// nil until a directory is configured.
	Directory     *DirectoryRecord
	DirectoryHeld *DirectoryRecord
	// Audit is the trail of accepted API writes (audit.go); only in
	// version-2 snapshots.
	Audit auditState
	// Clock is the last clock observation (clocks.go); nil until the
	// first, so logs from before it replay as they did.
	Clock *ClockSeen
	// Events are the recorded events and kf cursors (event.go).
	Events eventState
	// Removed holds the ids of removed members (removed.go), refused on
	// join and on Raft until readmitted.
	Removed map[string]RemovedMember

	// due indexes pending and claimed deliveries by when the executor must
	// look at them next, one tree per priority. Derived: rebuilt on restore,
	// never snapshotted.
	due [heraldtype.PriorityLow + 1]*btree.BTreeG[dueItem]
	// byRun lists delivery ids per run. Derived as well.
	byRun map[string][]string
	// taskQueue holds the pending tasks by due time, taskDone the others
	// (fired, cancelled): each task is in one of the two, so that a
	// million waiting tasks are not indexed twice. Derived.
	taskQueue, taskDone *btree.BTreeG[dueItem]
	// planning holds the keys of runs still planning.
	planning map[string]bool
	// heldRuns holds the keys of runs held for approval (approval.go);
	// recalls the ids of deliveries whose recall waits for their channel
	// (recall.go). Derived.
	heldRuns map[string]bool
	recalls  map[string]bool
	// cardUpdates holds the clicks whose replacement card waits for its
	// channel, by cardKey (card.go). Derived.
	cardUpdates map[string]bool
	// usesV4 says the state holds what only FSM version 4 reads (a hold,
	// a recall): snapshotFSM. Derived.
	usesV4 bool
	// payloads, during a restore only, holds one copy of each payload
	// read, for the deliveries to share.
	payloads map[string]json.RawMessage
	// checkTasks, during a check's read only (InspectSnapshot,
	// RewriteSnapshot), says the tasks are read and checked but not
	// kept: a backup's ten million would be gigabytes beside the state a
	// node serves.
	checkTasks bool
}

// dueItem is an entry of a due index: an instant, as Unix nanoseconds,
// and an id. There is one for every pending delivery and every task: 24
// bytes, where a time.Time would make 40.
type dueItem struct {
	at int64
	id string
}

// newDue is the entry of id at t. An instant outside the nanoseconds'
// range (before 1678, after 2262: no due time Herald takes) is held at
// its end; it then sorts with the others there by id.
func newDue(t time.Time, id string) dueItem {
	switch {
	case t.Before(dueMin):
		return dueItem{math.MinInt64, id}
	case t.After(dueMax):
		return dueItem{math.MaxInt64, id}
	}
	return dueItem{t.UnixNano(), id}
}

var dueMin, dueMax = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)

// time is the entry's instant, in UTC.
func (it dueItem) time() time.Time { return time.Unix(0, it.at).UTC() }

// after says whether the entry is after t.
func (it dueItem) after(t time.Time) bool { return it.at > newDue(t, "").at }

// dueCmp orders entries by instant, then id.
func dueCmp(a, b dueItem) int {
	if c := cmp.Compare(a.at, b.at); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

func dueLess(a, b dueItem) bool { return dueCmp(a, b) < 0 }

func newState() *state {
	s := &state{
		Cursors:    map[string]time.Time{},
		Members:    map[string]Member{},
		Alerts:     map[string]*Alert{},
		Missed:     map[string]map[string][]string{},
		Compensate: map[string]bool{},
		Daily:      map[string]map[string]*DayStats{},
		Paused:     map[string]*Pause{},
		Events:     newEventState(),
		Removed:    map[string]RemovedMember{},
	}
	s.initIndexes()
	return s
}

func (s *state) initIndexes() {
	for p := range s.due {
		s.due[p] = btree.NewG(32, dueLess)
	}
	s.byRun = map[string][]string{}
	s.taskQueue = btree.NewG(32, dueLess)
	s.taskDone = btree.NewG(32, dueLess)
	s.planning = map[string]bool{}
	s.heldRuns = map[string]bool{}
	s.recalls = map[string]bool{}
	s.cardUpdates = map[string]bool{}
}

// reindex builds the derived indexes of a state read by a restore (fresh
// from newState, its indexes empty but the tasks'). It inserts in order:
// a b-tree fills about twice as fast so as at random.
func (s *state) reindex() {
	s.Audit.reindex()
	for k, r := range s.Runs.All() {
		if r.Approval != nil || r.FiredToken != "" {
			s.usesV4 = true
		}
		if r.Approval != nil && r.Approval.State == ApprovalAwaiting {
			s.heldRuns[k] = true
		}
		if r.State == RunPlanning {
			s.planning[k] = true
		}
	}
	var due [heraldtype.PriorityLow + 1][]dueItem
	for id, d := range s.Deliveries.All() {
		if d.Recall != nil {
			s.usesV4 = true
			if !d.Recall.Done && d.State == StateSent {
				s.recalls[id] = true
			}
		}
		for _, k := range d.Clicks {
			s.usesV4 = true
			if k.UpdateState == CardUpdatePending {
				s.cardUpdates[cardKey(id, k.Event)] = true
			}
		}
		if at := s.dueAt(d); !at.IsZero() && !s.parked(d) {
			p := d.Priority
			if p < heraldtype.PriorityHigh || p > heraldtype.PriorityLow {
				p = heraldtype.PriorityLow
			}
			due[p] = append(due[p], newDue(at, id))
		}
		s.byRun[d.RunKey] = append(s.byRun[d.RunKey], id)
	}
	for p, items := range due {
		fillDue(s.due[p], items)
	}
	// A version-2 snapshot's readers index each task as they read it (in
	// due order, as written: a walk of ten million records and a sort
	// saved). Indexes that then hold other than one entry a task were
	// not filled so (a version-1 snapshot) or met a key twice (no
	// snapshot Herald wrote): they are made again from the tasks.
	if s.taskQueue.Len()+s.taskDone.Len() != s.Tasks.Len() {
		s.indexTasks()
	}
	s.Events.reindex()
}

// indexTasks makes the task indexes again from the tasks.
func (s *state) indexTasks() {
	s.taskQueue.Clear(false)
	s.taskDone.Clear(false)
	// Sized once: growing a slice of ten million copies it whole, and a
	// copy that large cannot be preempted, so a collection waiting to
	// stop the world, and so every goroutine of the node (Raft's
	// heartbeats among them), waits for it.
	pending, done := make([]dueItem, 0, s.Tasks.Len()), []dueItem(nil)
	for k, r := range s.Tasks.records() {
		if r.state() == TaskPending {
			pending = append(pending, newDue(r.due(), k))
		} else {
			done = append(done, newDue(r.due(), k))
		}
	}
	fillDue(s.taskQueue, pending)
	fillDue(s.taskDone, done)
}

// fillDue puts items in tree, sorted first: a b-tree fills faster in
// order.
func fillDue(tree *btree.BTreeG[dueItem], items []dueItem) {
	slices.SortFunc(items, dueCmp)
	for _, it := range items {
		tree.ReplaceOrInsert(it)
	}
}

// dueTree is the due index of priority p (unknown priorities go last).
func (s *state) dueTree(p heraldtype.Priority) *btree.BTreeG[dueItem] {
	if p < heraldtype.PriorityHigh || p > heraldtype.PriorityLow {
		p = heraldtype.PriorityLow
	}
	return s.due[p]
}

// putDelivery stores d, keeping the due index in step with it.
func (s *state) putDelivery(d *Delivery) {
	old, _ := s.Deliveries.Get(d.ID)
	s.replaceDelivery(old, d)
}

// addDelivery stores d, a delivery not stored before, without keeping d
// itself (addDeliveries makes one on its stack for each it plans).
func (s *state) addDelivery(d *Delivery) {
	s.byRun[d.RunKey] = append(s.byRun[d.RunKey], d.ID)
	s.Deliveries.m.Set(d.ID, compactCopy(d))
	s.indexDue(d)
}

// replaceDelivery is putDelivery for a caller that holds the record d
// replaces (nil for a new one): a read makes a Delivery (deliveryRec).
func (s *state) replaceDelivery(old, d *Delivery) {
	if old != nil {
		s.unindexDue(old)
	} else {
		s.byRun[d.RunKey] = append(s.byRun[d.RunKey], d.ID)
	}
	s.Deliveries.Set(d.ID, d)
	s.indexDue(d)
}

// replaceDeliveryCopy is replaceDelivery for a d the caller goes on to
// own (recordResults' copy on its stack): d itself is not kept.
func (s *state) replaceDeliveryCopy(old, d *Delivery) {
	s.unindexDue(old)
	s.Deliveries.m.Set(d.ID, compactCopy(d))
	s.indexDue(d)
}

// unindexDue takes d out of the due index (a no-op for a parked one, or
// one without a due time).
func (s *state) unindexDue(d *Delivery) {
	if at := s.dueAt(d); !at.IsZero() {
		s.dueTree(d.Priority).Delete(newDue(at, d.ID))
	}
}

// indexDue puts d in the due index if it has a due time (a digest's
// member has none: it goes with its digest) and is not parked: a paused
// rule's pending deliveries stay out, so the executor neither sends them
// nor wakes up for them until resume.
func (s *state) indexDue(d *Delivery) {
	if at := s.dueAt(d); !at.IsZero() && !s.parked(d) {
		s.dueTree(d.Priority).ReplaceOrInsert(newDue(at, d.ID))
	}
}

// putRun stores r, keeping the planning index in step with it.
func (s *state) putRun(r *Run) {
	s.Runs.Set(r.Key, r)
	if r.State == RunPlanning {
		s.planning[r.Key] = true
	} else {
		delete(s.planning, r.Key)
	}
}

// putTask stores t, keeping the task indexes in step with it.
func (s *state) putTask(t *Task) {
	if old, ok := s.Tasks.Get(t.Key); ok {
		s.taskTree(old).Delete(newDue(old.DueAt, old.Key))
	}
	k := s.Tasks.Set(t.Key, t)
	s.taskTree(t).ReplaceOrInsert(newDue(t.DueAt, k))
}

// taskTree is the index t belongs in by its state.
func (s *state) taskTree(t *Task) *btree.BTreeG[dueItem] {
	if t.State == TaskPending {
		return s.taskQueue
	}
	return s.taskDone
}

// tasksFrom yields the tasks from start on (a due time, and a key after
// which to go on; nil: from the first) by due time, then key: the two
// task indexes merged.
func (s *state) tasksFrom(start *dueItem) iter.Seq[*Task] {
	return s.tasksOf(mergeDue(dueFrom(s.taskQueue, start), dueFrom(s.taskDone, start)))
}

// tasksOf yields the tasks of items.
func (s *state) tasksOf(items iter.Seq[dueItem]) iter.Seq[*Task] {
	return func(yield func(*Task) bool) {
		for it := range items {
			if !yield(s.Tasks.At(it.id)) {
				return
			}
		}
	}
}

// taskRecords yields the records of every task by due time, then key,
// as tasksFrom(nil) yields the tasks, without making them.
func (s *state) taskRecords() iter.Seq[*taskRec] {
	return func(yield func(*taskRec) bool) {
		for it := range mergeDue(dueFrom(s.taskQueue, nil), dueFrom(s.taskDone, nil)) {
			if !yield(s.Tasks.record(it.id)) {
				return
			}
		}
	}
}

// dueFrom yields tree's items from start on (nil: from the first).
func dueFrom(tree *btree.BTreeG[dueItem], start *dueItem) iter.Seq[dueItem] {
	return func(yield func(dueItem) bool) {
		if start == nil {
			tree.Ascend(yield)
		} else {
			tree.AscendGreaterOrEqual(*start, yield)
		}
	}
}

// mergeDue yields the items of a and b, each in order, in one order. b
// is pulled, a pushed: b is to be the shorter.
func mergeDue(a, b iter.Seq[dueItem]) iter.Seq[dueItem] {
	return func(yield func(dueItem) bool) {
		next, stop := iter.Pull(b)
		defer stop()
		y, ok := next()
		for x := range a {
			for ; ok && dueLess(y, x); y, ok = next() {
				if !yield(y) {
					return
				}
			}
			if !yield(x) {
				return
			}
		}
		for ; ok; y, ok = next() {
			if !yield(y) {
				return
			}
		}
	}
}

// clone returns a shallow copy that can be read while s changes: records
// are immutable, so the maps of pointers are enough. The big ones are
// frozen in constant time (cowMap); the small ones copied. It must not
// take long: raft holds off Apply while it runs (BenchmarkSnapshotCapture).
func (s *state) clone() *state {
	missed := make(map[string]map[string][]string, len(s.Missed))
	for r, m := range s.Missed {
		missed[r] = maps.Clone(m)
	}
	daily := make(map[string]map[string]*DayStats, len(s.Daily))
	for d, m := range s.Daily {
		daily[d] = maps.Clone(m)
	}
	return &state{
		Runs:       s.Runs.freeze(),
		Deliveries: s.Deliveries.freeze(),
		Cursors:    maps.Clone(s.Cursors),
		Members:    maps.Clone(s.Members),
		Alerts:     maps.Clone(s.Alerts),
		Missed:     missed,
		Tasks:      s.Tasks.freeze(),
		Ledger:     s.Ledger.freeze(),
		Compensate: maps.Clone(s.Compensate),
		Daily:      daily,
		Paused:     maps.Clone(s.Paused),
		// Records are replaced, never mutated: the pointers are enough.
		Directory:     s.Directory,
		DirectoryHeld: s.DirectoryHeld,
		// Records are only appended or re-sliced: the header is enough
		// (its folds are copied).
		Audit: s.Audit.clone(),
		// Replaced whole by each observation, never changed in place.
		Clock:   s.Clock,
		Events:  s.Events.clone(),
		Removed: maps.Clone(s.Removed),
		// Lazily copied on write; Persist writes the tasks in their order.
		taskQueue: s.taskQueue.Clone(),
		taskDone:  s.taskDone.Clone(),
		usesV4:    s.usesV4,
	}
}

// AlertID is the deterministic id of the alert for a cause.
func AlertID(cause string) string {
	h := sha256.Sum256([]byte(cause))
	return hex.EncodeToString(h[:8])
}

// raiseCause raises the alert of c, keyed by c.Key().
func (s *state) raiseCause(c AlertCause, rule string, p AlertParams, msg string, now time.Time) {
	s.raise(c, c.Key(), rule, p, msg, now)
}

// raise raises the alert of cause (keyed by key: c.Key() for the causes
// Apply raises, the command's own key for RaiseAlert) with the facts of
// this occurrence.
func (s *state) raise(c AlertCause, key, rule string, p AlertParams, msg string, now time.Time) {
	id := AlertID(key)
	a := &Alert{ID: id, Cause: key, Kind: c.Kind, Params: &p, Rule: rule, Message: msg, First: now, Last: now, Count: 1}
	if old, ok := s.Alerts[id]; ok {
		a.First = old.First
		a.Count = old.Count + 1
		a.Notified, a.NotifiedAt = old.Notified, old.NotifiedAt
		// A repeat re-opens an acknowledged alert only if the message
		// changed; the same problem again stays acknowledged.
		a.Acked = old.Acked && old.Message == msg
	}
	s.Alerts[id] = a
}
