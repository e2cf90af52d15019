package engine

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// Reads of the local replicated state. They return records (immutable, see
// record.go) or copies, so callers may keep them.

// Run returns the run with key, if any.
func (f *FSM) Run(key string) (*Run, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, ok := f.st.Runs.Get(key)
	return r, ok
}

// Delivery returns the delivery with id, if any.
func (f *FSM) Delivery(id string) (*Delivery, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d, ok := f.st.Deliveries.Get(id)
	return d, ok
}

// Cursor returns the latest slot of rule that fired (or the instant its
// schedule started counting from).
func (f *FSM) Cursor(rule string) (time.Time, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.st.Cursors[rule]
	return t, ok
}

// Members returns the cluster members' records, sorted by id.
func (f *FSM) Members() []Member {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := slices.Collect(maps.Values(f.st.Members))
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Missed returns a copy of rule's missed slots per recipient.
func (f *FSM) Missed(rule string) map[string][]string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[string][]string{}
	for k, v := range f.st.Missed[rule] {
		out[k] = slices.Clone(v)
	}
	return out
}

// Runs returns the runs that match keep, sorted by slot then key.
func (f *FSM) Runs(keep func(*Run) bool) []*Run {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*Run
	for _, r := range f.st.Runs.All() {
		if keep == nil || keep(r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *Run) int {
		if c := a.Slot.Compare(b.Slot); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return out
}

// Deliveries returns the deliveries that match keep, sorted by not_before
// then id.
func (f *FSM) Deliveries(keep func(*Delivery) bool) []*Delivery {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*Delivery
	for _, d := range f.st.Deliveries.All() {
		if keep == nil || keep(d) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b *Delivery) int {
		if c := a.NotBefore.Compare(b.NotBefore); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}

// RunDeliveries returns the deliveries of one run, in no meaningful order
// (plan order where the plan was applied, map order after a restore): sort
// them before showing them.
func (f *FSM) RunDeliveries(runKey string) []*Delivery {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ids := f.st.byRun[runKey]
	out := make([]*Delivery, 0, len(ids))
	for _, id := range ids {
		out = append(out, f.st.Deliveries.At(id))
	}
	return out
}

// Alerts returns every alert, newest first.
func (f *FSM) Alerts() []*Alert {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := slices.Collect(maps.Values(f.st.Alerts))
	slices.SortFunc(out, func(a, b *Alert) int {
		if c := b.Last.Compare(a.Last); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}

// Due returns the deliveries the executor must act on at now: pending
// ones that may be sent, and claimed ones whose claim timed out, high
// priority first, then by due time; up to limit oldest, plus, where those
// filled it, up to limit/8 of the most recently due of each priority. It walks the due index, so its
// cost is in what is due, not in what waits; and a backlog of normal
// deliveries never hides a high one.
func (f *FSM) Due(now time.Time, limit int) []*Delivery {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*Delivery
	for p := heraldtype.PriorityHigh; p <= heraldtype.PriorityLow; p++ {
		full := false
		taken := map[string]bool{}
		f.st.due[p].Ascend(func(it dueItem) bool {
			if it.after(now) {
				return false
			}
			if len(out) >= limit {
				full = true
				return false
			}
			out = append(out, f.st.Deliveries.At(it.id))
			taken[it.id] = true
			return true
		})
		if !full {
			continue
		}
		// A backlog fills the limit with its oldest deliveries; the most
		// recently due ones (another rule's slot that just came) are added
		// too, so that a huge run cannot hide them until it has drained.
		newest := 0
		f.st.due[p].DescendLessOrEqual(newDue(now, maxID), func(it dueItem) bool {
			if taken[it.id] || newest >= limit/dueNewestShare {
				return false
			}
			out = append(out, f.st.Deliveries.At(it.id))
			newest++
			return true
		})
	}
	return out
}

// DueAt returns the deliveries the due index holds at exactly at, of
// every priority. The members of digests wait for the end of their window,
// all at one instant: a pass that took only part of what is due completes
// their groups from here (executor.completeDigestGroups).
func (f *FSM) DueAt(at time.Time) []*Delivery {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*Delivery
	for p := heraldtype.PriorityHigh; p <= heraldtype.PriorityLow; p++ {
		f.st.due[p].AscendRange(newDue(at, ""), newDue(at.Add(1), ""), func(it dueItem) bool {
			out = append(out, f.st.Deliveries.At(it.id))
			return true
		})
	}
	return out
}

// dueNewestShare: Due adds up to limit/dueNewestShare of the most recently
// due deliveries of a priority whose oldest filled the limit.
const dueNewestShare = 8

// maxID sorts after every delivery id (hex strings) at the same instant.
const maxID = "\xff"

// NextDue returns the earliest instant after after at which a delivery
// becomes due. The executor wakes then: what is due already and waits (a
// channel's rate limit, a send in flight) must neither make it spin nor
// hide a delivery due a few seconds later behind its own long wait.
func (f *FSM) NextDue(after time.Time) (time.Time, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var at time.Time
	found := false
	for p := heraldtype.PriorityHigh; p <= heraldtype.PriorityLow; p++ {
		f.st.due[p].AscendGreaterOrEqual(newDue(after.Add(1), ""), func(it dueItem) bool {
			if !found || it.time().Before(at) {
				at, found = it.time(), true
			}
			return false
		})
	}
	return at, found
}

// PlanningRuns returns the runs still planning, by slot then key.
func (f *FSM) PlanningRuns() []*Run {
	f.mu.RLock()
	out := make([]*Run, 0, len(f.st.planning))
	for k := range f.st.planning {
		out = append(out, f.st.Runs.At(k))
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Run) int {
		if c := a.Slot.Compare(b.Slot); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return out
}

func sortDeliveries(ds []*Delivery) {
	slices.SortFunc(ds, func(a, b *Delivery) int { return cmp.Compare(a.ID, b.ID) })
}

// InFlight returns every claimed delivery. A new leader resends those
// claimed by an older term at once instead of waiting for their claims to
// time out.
func (f *FSM) InFlight() []*Delivery {
	return f.Deliveries(func(d *Delivery) bool { return d.State == StateClaimed })
}
