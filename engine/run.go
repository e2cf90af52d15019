package engine

import "time"

// RunKnown reports whether a run with key exists or existed (its key is
// in the ledger): StartRun would refuse it.
func (f *FSM) RunKnown(key string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if _, ok := f.st.Runs.Get(key); ok {
		return true
	}
	_, ok := f.st.Ledger.Get(key)
	return ok
}

// Every StartRun is built by one of the constructors below, so that a
// run's key and date are derived in one place: the scheduler's StartRun of
// a slot and a manual fire of it must name the same run, or the slot
// would fire twice.

// slotRun is the StartRun of rule r's slot in zone (r.Timezone, or one of
// r.FireZones for a per-recipient rule).
func slotRun(r Rule, zone string, slot time.Time, rulesHash string, now time.Time) StartRun {
	key := RunKey(r.Name, slot)
	if r.PerRecipient {
		key = ZoneRunKey(r.Name, zone, slot)
	}
	return StartRun{Key: key, Rule: r.Name, Slot: slot, Zone: zone, Date: SlotDate(slot, zone), RulesHash: rulesHash, Now: now}
}

// ScheduledRun is the scheduler's StartRun of a slot, proposed at now:
// late once it is more than lateAfter behind, skipped (recorded and
// alerted, nothing sent) beyond catchup.
func ScheduledRun(r Rule, zone string, slot time.Time, rulesHash string, now time.Time, lateAfter, catchup time.Duration) StartRun {
	c := slotRun(r, zone, slot, rulesHash, now)
	lateBy := now.Sub(slot)
	c.Late, c.Skip = lateBy > lateAfter, lateBy > catchup
	return c
}

// ManualRun is a fire by hand of rule r's slot in zone, at now: the
// scheduler's run key, flagged Manual (it leaves the rule's cursor alone).
func ManualRun(r Rule, zone string, slot time.Time, rulesHash string, now time.Time) StartRun {
	c := slotRun(r, zone, slot, rulesHash, now)
	c.Manual = true
	return c
}

// TaskRun is the StartRun of API task t, whose rule's zone is zone, fired
// at now: late once it is more than lateAfter behind its due time.
func TaskRun(t *Task, zone, rulesHash string, now time.Time, lateAfter time.Duration) StartRun {
	return StartRun{
		Key: TaskRunKey(t.Key), Rule: t.Rule, Slot: t.DueAt, Zone: zone, TaskKey: t.Key, Data: t.Data,
		Date: SlotDate(t.DueAt, zone), Late: now.Sub(t.DueAt) > lateAfter, RulesHash: rulesHash, Now: now,
	}
}
