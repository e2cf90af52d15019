package leader

import (
	"context"
	"errors"
	"time"

	"github.com/heraldhq/herald/engine"
)

// fire starts the runs of rule r's due slots and returns its next slot.
//
// A per-recipient rule (timezone = "recipient") fires its schedule once in
// each zone of r.Zones, each local slot its own run (ZoneRunKey) planned
// for the people of that zone only. The zones share the rule's one cursor:
// their slots are walked as one sequence in UTC order, so the cursor is
// the latest instant at which every zone's slot was started. Two zones
// can share an instant (Berlin and Paris); a leader that died between
// their StartRuns leaves the cursor on that instant, so the walk starts
// just before the cursor and completes it (runs already known are not
// proposed again).
func (s *scheduler) fire(ctx context.Context, r engine.Rule, hash string, now time.Time) (time.Time, bool) {
	zones := r.FireZones()
	scheds := make([]engine.Schedule, len(zones))
	for i, z := range zones {
		rz := r
		rz.Timezone = z
		sched, err := s.schedule(rz)
		if err != nil {
			s.l.log.Error("rule schedule is invalid", "rule", r.Name, "zone", z, "err", err)
			return time.Time{}, false
		}
		scheds[i] = sched
	}
	cursor, ok := s.l.cfg.FSM.Cursor(r.Name)
	if !ok {
		// First sight of the rule, cluster wide: count slots from now on,
		// replicated, so a later leader misses nothing in between.
		if _, err := s.l.propose(ctx, engine.CmdInitCursor, engine.InitCursor{Rule: r.Name, At: now}); err != nil {
			s.l.log.Warn("cannot start rule's schedule", "rule", r.Name, "err", err)
			return time.Time{}, false
		}
		cursor, _ = s.l.cfg.FSM.Cursor(r.Name)
	}
	catchup := r.Catchup
	if catchup <= 0 {
		catchup = engine.DefaultCatchup
	}
	after := cursor
	if r.PerRecipient {
		after = cursor.Add(-time.Nanosecond)
	}
	next := make([]time.Time, len(zones))
	has := make([]bool, len(zones))
	for i, sc := range scheds {
		next[i], has[i] = sc.Next(after)
	}
	ahead := false // a slot after now was started in this pass
	for range maxSlotsPerPass {
		slot, found := time.Time{}, false
		for i := range zones {
			if has[i] && (!found || next[i].Before(slot)) {
				slot, found = next[i], true
			}
		}
		if !found {
			return time.Time{}, false
		}
		// A slot is started (and so planned and replicated) PlanAhead
		// before it: its deliveries wait in the due index for their send
		// time, and the first one leaves at the slot, not after planning.
		if start := slot.Add(-s.l.planner.planLead(r.Name)); start.After(now) {
			return start, true
		}
		if ahead && slot.After(now) {
			// One slot ahead a pass: a rule not planned yet has the whole
			// PlanAhead as its lead, and a fast schedule would otherwise
			// start a minute of runs with the rules of this instant. By the
			// next pass its plan has measured its lead.
			return now.Add(planLeadMin), true
		}
		ahead = ahead || slot.After(now)
		for i, z := range zones {
			if !has[i] || !next[i].Equal(slot) {
				continue
			}
			if !s.startSlot(ctx, r, z, slot, hash, now, catchup) {
				return now.Add(time.Second), true
			}
			next[i], has[i] = scheds[i].Next(slot)
		}
	}
	return now, true // more slots to catch up: come back at once
}

// startSlot proposes the run of rule r's slot (in zone, for a
// per-recipient rule). It returns false when the log would not take it.
func (s *scheduler) startSlot(ctx context.Context, r engine.Rule, zone string, slot time.Time, hash string, now time.Time, catchup time.Duration) bool {
	c := engine.ScheduledRun(r, zone, slot, hash, now, s.l.cfg.LateAfter, catchup)
	if r.PerRecipient && s.l.cfg.FSM.RunKnown(c.Key) {
		return true // started by an earlier pass or leader
	}
	if _, err := s.l.propose(ctx, engine.CmdStartRun, c); err != nil && !errors.Is(err, engine.ErrRunExists) {
		s.l.log.Warn("cannot start run", "run", c.Key, "err", err)
		return false
	}
	switch {
	case c.Skip:
		s.l.log.Warn("slot missed beyond catch-up: skipped and alerted", "run", c.Key, "late_by", now.Sub(slot))
	case c.Late:
		s.l.log.Warn("slot fired late", "run", c.Key, "late_by", now.Sub(slot))
	}
	return true
}

func (s *scheduler) schedule(r engine.Rule) (engine.Schedule, error) {
	id := r.Name + "\x00" + r.Timezone
	c, ok := s.schedules[id]
	if ok && c.spec == r.Schedule && c.zone == r.Timezone && c.cal == r.Calendar && c.shift == r.Shift {
		return c.s, c.err
	}
	sched, err := s.l.cfg.ScheduleFunc(r)
	s.schedules[id] = cachedSchedule{spec: r.Schedule, zone: r.Timezone, cal: r.Calendar, shift: r.Shift, s: sched, err: err}
	return sched, err
}
