package api

import (
	"time"

	"github.com/heraldhq/herald/engine"
)

const (
	// missedGrace is how long after its slot a run may take to appear
	// before the slot counts as missed: the scheduler fires on time, and
	// an alert is due within a minute anyway.
	missedGrace = time.Minute
	// maxSlotsChecked bounds the slots of one day looked at per rule (an
	// "@every 1s" rule has 86,400); past it the counts stop.
	maxSlotsChecked = 20000
	maxMissedShown  = 50
	nextFiresShown  = 5
)

// DefaultDisplayTimezone is the zone people read times in when the
// cluster names none: Herald's users are mostly in China.
const DefaultDisplayTimezone = "Asia/Shanghai"

// displayZone is the zone of the cluster's display_timezone.
func (s *server) displayZone() *time.Location {
	name := s.cfg.DisplayTimezone
	if name == "" {
		name = DefaultDisplayTimezone
	}
	if loc, err := engine.LoadZone(name); err == nil {
		return loc
	}
	return time.UTC
}

// addSchedule adds to rs what the loaded rule says about date: its API
// tasks due that day, its next slots, and the day's slots that did not
// fire as they should.
func (s *server) addSchedule(rs *RuleStats, rule engine.Rule, date string, now time.Time) {
	rs.Schedule, rs.Timezone = rule.Schedule, rule.Timezone
	loc := engine.ZoneLocation(rule.Timezone)
	day, err := time.ParseInLocation(time.DateOnly, date, loc)
	if err != nil {
		return
	}
	next := day.AddDate(0, 0, 1)
	if rule.Schedule == "" {
		tasks, _ := s.cfg.FSM.ListTasks(engine.TaskFilter{Rule: rule.Name, State: engine.TaskPending, From: day, To: next})
		rs.TasksDue = len(tasks)
		return
	}
	if s.cfg.ScheduleFunc == nil {
		return
	}
	sched, err := s.cfg.ScheduleFunc(rule)
	if err != nil {
		return
	}
	// The day's slots up to now: those after the rule's cursor were never
	// fired (no leader, or it is behind); those at or before it without a
	// run came before the rule was first seen, and are not counted.
	cursor, known := s.cfg.FSM.Cursor(rule.Name)
	end := now.Add(-missedGrace)
	if next.Before(end) {
		end = next
	}
	t, ok := sched.Next(day.Add(-time.Nanosecond))
	for n := 0; ok && t.Before(end) && n < maxSlotsChecked; n++ {
		key := engine.RunKey(rule.Name, t)
		run, fired := s.cfg.FSM.RunFired(key)
		switch {
		case !fired && (!known || !t.After(cursor)):
			// before the rule existed here: not expected
		case !fired:
			rs.ExpectedSlots++
			s.missed(rs, MissedSlot{Slot: t, State: "missing", Run: key})
		default:
			rs.ExpectedSlots++
			if run != nil && run.State != engine.RunPlanned && run.State != engine.RunPlanning {
				s.missed(rs, MissedSlot{Slot: t, State: run.State.String(), Run: key})
			}
		}
		t, ok = sched.Next(t)
	}
}

func (s *server) missed(rs *RuleStats, m MissedSlot) {
	rs.MissedCount++
	if len(rs.MissedSlots) < maxMissedShown {
		rs.MissedSlots = append(rs.MissedSlots, m)
	}
}

// upcoming lists a scheduled rule's next slots after now.
func (s *server) upcoming(rule engine.Rule, now time.Time) Upcoming {
	u := Upcoming{Rule: rule.Name, Schedule: rule.Schedule, Timezone: rule.Timezone, NextFires: []time.Time{}}
	if u.Timezone == "" {
		u.Timezone = "UTC"
	}
	if s.cfg.ScheduleFunc == nil {
		return u
	}
	sched, err := s.cfg.ScheduleFunc(rule)
	if err != nil {
		u.Error = err.Error()
		return u
	}
	after := now
	for range nextFiresShown {
		t, ok := sched.Next(after)
		if !ok {
			break
		}
		u.NextFires = append(u.NextFires, t)
		after = t
	}
	return u
}
