package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
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
	Deliveries cowMap[*Delivery]
	Cursors    map[string]time.Time
	Members    map[string]Member
	Alerts     map[string]*Alert
	// Missed maps rule → recipient → earlier slots (RFC 3339) whose delivery
	// finally failed and has not been made good by a later sent one.
	Missed map[string]map[string][]string
	// Tasks are the API tasks by key.
	Tasks cowMap[*Task]
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
	// taskQueue holds pending tasks by due time; taskIndex all tasks.
	taskQueue, taskIndex *btree.BTreeG[dueItem]
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
}

type dueItem struct {
	at time.Time
	id string
}

func dueLess(a, b dueItem) bool {
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	return a.id < b.id
}

// dueLessCmp orders like dueLess, as a comparison.
func dueLessCmp(at time.Time, id string, bt time.Time, bid string) int {
	if c := at.Compare(bt); c != 0 {
		return c
	}
	return strings.Compare(id, bid)
}

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
	s.taskIndex = btree.NewG(32, dueLess)
	s.planning = map[string]bool{}
	s.heldRuns = map[string]bool{}
	s.recalls = map[string]bool{}
	s.cardUpdates = map[string]bool{}
}

// reindex rebuilds the derived indexes after a restore. It inserts in
// order: a b-tree fills about twice as fast so as at random.
func (s *state) reindex() {
	s.initIndexes()
	s.Audit.reindex()
	for k, r := range s.Runs.All() {
		if r.Approval != nil || r.FiredToken != "" {
			s.usesV4 = true
		}
		if r.Approval != nil && r.Approval.State == ApprovalAwaiting {
			s.heldRuns[k] = true
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
			due[p] = append(due[p], dueItem{at, id})
		}
		s.byRun[d.RunKey] = append(s.byRun[d.RunKey], id)
	}
	for p, items := range due {
		sortDue(items)
		for _, it := range items {
			s.due[p].ReplaceOrInsert(it)
		}
	}
	type taskItem struct {
		dueItem
		pending bool
	}
	tasks := make([]taskItem, 0, s.Tasks.Len())
	for k, t := range s.Tasks.All() {
		tasks = append(tasks, taskItem{dueItem{t.DueAt, k}, t.State == TaskPending})
	}
	slices.SortFunc(tasks, func(a, b taskItem) int { return dueLessCmp(a.at, a.id, b.at, b.id) })
	pending := 0
	for _, it := range tasks {
		s.taskIndex.ReplaceOrInsert(it.dueItem)
		if it.pending {
			pending++
		}
	}
	// Most tasks wait, as a rule: the queue is the index, lazily copied,
	// less the few that do not.
	if pending >= len(tasks)/2 {
		s.taskQueue = s.taskIndex.Clone()
	}
	for _, it := range tasks {
		switch {
		case pending >= len(tasks)/2 && !it.pending:
			s.taskQueue.Delete(it.dueItem)
		case pending < len(tasks)/2 && it.pending:
			s.taskQueue.ReplaceOrInsert(it.dueItem)
		}
	}
	for k, r := range s.Runs.All() {
		if r.State == RunPlanning {
			s.planning[k] = true
		}
	}
	s.Events.reindex()
}

func sortDue(items []dueItem) {
	slices.SortFunc(items, func(a, b dueItem) int { return dueLessCmp(a.at, a.id, b.at, b.id) })
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
	if old, ok := s.Deliveries.Get(d.ID); ok {
		if at := s.dueAt(old); !at.IsZero() {
			s.dueTree(old.Priority).Delete(dueItem{at, old.ID}) // a no-op for a parked one
		}
	} else {
		s.byRun[d.RunKey] = append(s.byRun[d.RunKey], d.ID)
	}
	s.Deliveries.Set(d.ID, d)
	s.indexDue(d)
}

// indexDue puts d in the due index if it has a due time (a digest's
// member has none: it goes with its digest) and is not parked: a paused
// rule's pending deliveries stay out, so the executor neither sends them
// nor wakes up for them until resume.
func (s *state) indexDue(d *Delivery) {
	if at := s.dueAt(d); !at.IsZero() && !s.parked(d) {
		s.dueTree(d.Priority).ReplaceOrInsert(dueItem{at, d.ID})
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
		s.taskQueue.Delete(dueItem{old.DueAt, old.Key})
		s.taskIndex.Delete(dueItem{old.DueAt, old.Key})
	}
	s.Tasks.Set(t.Key, t)
	s.taskIndex.ReplaceOrInsert(dueItem{t.DueAt, t.Key})
	if t.State == TaskPending {
		s.taskQueue.ReplaceOrInsert(dueItem{t.DueAt, t.Key})
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
		// Lazily copied on write; Persist writes the tasks in its order.
		taskIndex: s.taskIndex.Clone(),
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
