package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"time"

	"github.com/google/btree"
)

// state is the replicated state. Only Apply and Restore write it, under
// the FSM's lock; records are replaced, never mutated (see record.go).
type state struct {
	Runs       map[string]*Run      `json:"runs"`
	Deliveries map[string]*Delivery `json:"deliveries"`
	Cursors    map[string]time.Time `json:"cursors"`
	Members    map[string]Member    `json:"members"`
	Alerts     map[string]*Alert    `json:"alerts"`
	// Missed maps rule → recipient → earlier slots (RFC 3339) whose delivery
	// finally failed and has not been made good by a later sent one.
	Missed map[string]map[string][]string `json:"missed"`

	// due indexes pending and claimed deliveries by when the executor must
	// look at them next. Derived: rebuilt on restore, never snapshotted.
	due *btree.BTreeG[dueItem]
	// byRun lists delivery ids per run. Derived as well.
	byRun map[string][]string
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

func newState() *state {
	return &state{
		Runs:       map[string]*Run{},
		Deliveries: map[string]*Delivery{},
		Cursors:    map[string]time.Time{},
		Members:    map[string]Member{},
		Alerts:     map[string]*Alert{},
		Missed:     map[string]map[string][]string{},
		due:        btree.NewG(32, dueLess),
		byRun:      map[string][]string{},
	}
}

// reindex rebuilds the derived indexes after a restore.
func (s *state) reindex() {
	s.due = btree.NewG(32, dueLess)
	s.byRun = map[string][]string{}
	for id, d := range s.Deliveries {
		if at := d.dueAt(); !at.IsZero() {
			s.due.ReplaceOrInsert(dueItem{at, id})
		}
		s.byRun[d.RunKey] = append(s.byRun[d.RunKey], id)
	}
}

// putDelivery stores d, keeping the due index in step with it.
func (s *state) putDelivery(d *Delivery) {
	if old, ok := s.Deliveries[d.ID]; ok {
		if at := old.dueAt(); !at.IsZero() {
			s.due.Delete(dueItem{at, old.ID})
		}
	} else {
		s.byRun[d.RunKey] = append(s.byRun[d.RunKey], d.ID)
	}
	s.Deliveries[d.ID] = d
	if at := d.dueAt(); !at.IsZero() {
		s.due.ReplaceOrInsert(dueItem{at, d.ID})
	}
}

// clone returns a shallow copy whose maps can be read while s changes:
// records are immutable, so copying the maps of pointers is enough.
func (s *state) clone() *state {
	missed := make(map[string]map[string][]string, len(s.Missed))
	for r, m := range s.Missed {
		missed[r] = maps.Clone(m)
	}
	return &state{
		Runs:       maps.Clone(s.Runs),
		Deliveries: maps.Clone(s.Deliveries),
		Cursors:    maps.Clone(s.Cursors),
		Members:    maps.Clone(s.Members),
		Alerts:     maps.Clone(s.Alerts),
		Missed:     missed,
	}
}

// AlertID is the deterministic id of the alert for a cause.
func AlertID(cause string) string {
	h := sha256.Sum256([]byte(cause))
	return hex.EncodeToString(h[:8])
}

func (s *state) raise(cause, rule, msg string, now time.Time) {
	id := AlertID(cause)
	a := &Alert{ID: id, Cause: cause, Rule: rule, Message: msg, First: now, Last: now, Count: 1}
	if old, ok := s.Alerts[id]; ok {
		a.First = old.First
		a.Count = old.Count + 1
		// A repeat re-opens an acknowledged alert only if the message
		// changed; the same problem again stays acknowledged.
		a.Acked = old.Acked && old.Message == msg
	}
	s.Alerts[id] = a
}
