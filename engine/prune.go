package engine

import (
	"slices"
	"time"
)

// Defaults of retention.
const (
	RetentionDefault       = 7 * 24 * time.Hour
	LedgerRetentionDefault = 90 * 24 * time.Hour
	PruneEveryDefault      = time.Hour
)

// Prune drops what retention no longer needs: final deliveries that ended
// before Before, then runs and tasks left with no deliveries, and
// acknowledged alerts last seen before Before. A pruned run's key stays in
// the ledger until LedgerBefore, so its slot (or task key) cannot fire
// again. Daily aggregates are kept.
type Prune struct {
	Before       time.Time `json:"before"`
	LedgerBefore time.Time `json:"ledger_before"`
	Now          time.Time `json:"now"`
}

// PruneResult is what Apply returns for CmdPrune.
type PruneResult struct {
	Deliveries, Runs, Tasks, Alerts, Ledger int
	// Missed counts the missed slots forgotten: a person who fails every
	// day would otherwise carry an ever longer list in to.missed.
	Missed int
}

func (a applier) prune(c Prune) any {
	a.stamp(c.Now)
	if err := a.horizonAhead(CmdPrune, c.Now, c.Before, c.LedgerBefore); err != nil {
		return err
	}
	var res PruneResult
	gone := map[string]bool{}
	for id, r := range a.st.Deliveries.records() { // records: no Delivery made for those that stay
		if r.getState().Final() && r.endedBefore(c.Before) && !a.st.Compensate[id] {
			d := r.delivery()
			a.st.Deliveries.Delete(id)
			// Nothing waits for its channel any more: a recall or card
			// update left asked would name a delivery no longer held.
			delete(a.st.recalls, id)
			for _, k := range d.Clicks {
				delete(a.st.cardUpdates, cardKey(id, k.Event))
			}
			gone[d.RunKey] = true
			res.Deliveries++
		}
	}
	for key := range gone {
		ids := slices.DeleteFunc(slices.Clone(a.st.byRun[key]), func(id string) bool {
			_, ok := a.st.Deliveries.Get(id)
			return !ok
		})
		if len(ids) == 0 {
			delete(a.st.byRun, key)
		} else {
			a.st.byRun[key] = ids
		}
	}
	for key, r := range a.st.Runs.All() {
		if r.State != RunPlanning && r.StartedAt.Before(c.Before) && len(a.st.byRun[key]) == 0 {
			a.st.Runs.Delete(key)
			// Kept for LedgerRetention after its slot, or after it fired
			// if later (a backfill, a task due long ago).
			a.st.Ledger.Set(key, latest(r.Slot, r.StartedAt))
			res.Runs++
		}
	}
	for key, r := range a.st.Tasks.records() {
		if r.state() == TaskPending {
			continue // the most of them, held compact: no Task made to skip it
		}
		t := r.task()
		ended := t.FiredAt
		if t.State == TaskCancelled {
			ended = t.CancelledAt
		}
		if _, running := a.st.Runs.Get(TaskRunKey(key)); t.State != TaskPending && !running && ended.Before(c.Before) {
			a.st.taskDone.Delete(newDue(t.DueAt, key))
			a.st.Tasks.Delete(key)
			res.Tasks++
		}
	}
	for id, al := range a.st.Alerts {
		if al.Acked && al.Last.Before(c.Before) {
			delete(a.st.Alerts, id)
			res.Alerts++
		}
	}
	for key, slot := range a.st.Ledger.All() {
		if slot.Before(c.LedgerBefore) {
			a.st.Ledger.Delete(key)
			res.Ledger++
		}
	}
	res.Missed = a.pruneMissed(c.Before)
	return res
}

// pruneMissed forgets missed slots older than before. Lists are replaced,
// never changed in place: a snapshot may share them.
func (a applier) pruneMissed(before time.Time) int {
	n := 0
	for rule, people := range a.st.Missed {
		for who, slots := range people {
			keep := slices.DeleteFunc(slices.Clone(slots), func(s string) bool {
				t, err := time.Parse(time.RFC3339, s)
				return err == nil && t.Before(before)
			})
			switch {
			case len(keep) == len(slots):
				continue
			case len(keep) == 0:
				delete(people, who)
			default:
				people[who] = keep
			}
			n += len(slots) - len(keep)
		}
		if len(people) == 0 {
			delete(a.st.Missed, rule)
		}
	}
	return n
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
