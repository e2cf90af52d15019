package engine

import (
	"context"
	"errors"
	"sync"
	"time"
)

// maxSlotsPerPass bounds how many slots of one rule a scheduler pass fires,
// so a long outage of a fast schedule cannot stall the others.
const maxSlotsPerPass = 1000

// scheduler fires rule slots (StartRun) and plans started runs. It lives
// only while its node leads.
type scheduler struct {
	l         *Leader
	schedules map[string]cachedSchedule // by rule name
	planning  map[string]bool           // run keys being planned now
	mu        sync.Mutex
	sem       chan struct{}
	wg        sync.WaitGroup
}

type cachedSchedule struct {
	spec, zone, cal, shift string
	s                      Schedule
	err                    error
}

func newScheduler(l *Leader) *scheduler {
	return &scheduler{
		l:         l,
		schedules: map[string]cachedSchedule{},
		planning:  map[string]bool{},
		sem:       make(chan struct{}, l.cfg.Planners),
	}
}

func (s *scheduler) run(ctx context.Context) {
	defer s.wg.Wait()
	for {
		next := s.runOnce(ctx)
		if !wait(ctx, next, s.l.now(), s.l.cfg.RulesChanged, s.l.cfg.FSM.TasksChanged()) {
			return
		}
	}
}

// maxTasksPerPass bounds how many due tasks one scheduler pass fires.
const maxTasksPerPass = 1000

// runOnce fires every slot and task that is due, starts planning every run
// still planning, and returns when it should run again.
func (s *scheduler) runOnce(ctx context.Context) time.Time {
	now := s.l.now()
	wake := now.Add(time.Minute)
	hash := s.l.cfg.Rules.Hash()
	for _, r := range s.l.cfg.Rules.Rules() {
		if r.Schedule == "" || ctx.Err() != nil {
			continue
		}
		if next, ok := s.fire(ctx, r, hash, now); ok && next.Before(wake) {
			wake = next
		}
	}
	if next, ok := s.fireTasks(ctx, hash, now); ok && next.Before(wake) {
		wake = next
	}
	s.planPending(ctx)
	return wake
}

// fireTasks starts the runs of the API tasks due at now and returns when
// the next one is due.
func (s *scheduler) fireTasks(ctx context.Context, hash string, now time.Time) (time.Time, bool) {
	due := s.l.cfg.FSM.DueTasks(now, maxTasksPerPass)
	for _, t := range due {
		if ctx.Err() != nil {
			return now, true
		}
		r, _ := s.l.findRule(t.Rule)
		c := StartRun{
			Key: TaskRunKey(t.Key), Rule: t.Rule, Slot: t.DueAt, Zone: r.Timezone, TaskKey: t.Key, Data: t.Data,
			Date: SlotDate(t.DueAt, r.Timezone), Late: now.Sub(t.DueAt) > s.l.cfg.LateAfter, RulesHash: hash, Now: now,
		}
		if _, err := s.l.propose(ctx, CmdStartRun, c); err != nil {
			if !errors.Is(err, ErrRunExists) {
				s.l.log.Warn("cannot fire task", "task", t.Key, "err", err)
				return now.Add(time.Second), true
			}
			if tk, ok := s.l.cfg.FSM.Task(t.Key); ok && tk.State == TaskPending {
				s.l.log.Warn("a due task cannot fire: its run key is taken", "task", t.Key)
			}
		}
	}
	if len(due) == maxTasksPerPass {
		return now, true
	}
	next, ok := s.l.cfg.FSM.NextTaskDue()
	if ok && !next.After(now) {
		// Still pending although due: its run was refused (or it was
		// submitted just now, and TasksChanged wakes us at once). Looking
		// again at once would spin.
		return now.Add(time.Second), true
	}
	return next, ok
}

// SlotDate is slot's date (YYYY-MM-DD) in zone (UTC when zone is empty
// or unknown): the date a run's statistics are counted under.
func SlotDate(slot time.Time, zone string) string {
	return slot.In(location(zone)).Format(time.DateOnly)
}

// locations caches loaded zones: LoadLocation reads zone data every call.
var locations sync.Map

func location(zone string) *time.Location {
	if l, ok := locations.Load(zone); ok {
		return l.(*time.Location)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		loc = time.UTC
	}
	locations.Store(zone, loc)
	return loc
}

// fire starts the runs of rule r's due slots and returns its next slot.
func (s *scheduler) fire(ctx context.Context, r Rule, hash string, now time.Time) (time.Time, bool) {
	sched, err := s.schedule(r)
	if err != nil {
		s.l.log.Error("rule schedule is invalid", "rule", r.Name, "err", err)
		return time.Time{}, false
	}
	cursor, ok := s.l.cfg.FSM.Cursor(r.Name)
	if !ok {
		// First sight of the rule, cluster wide: count slots from now on,
		// replicated, so a later leader misses nothing in between.
		if _, err := s.l.propose(ctx, CmdInitCursor, InitCursor{Rule: r.Name, At: now}); err != nil {
			s.l.log.Warn("cannot start rule's schedule", "rule", r.Name, "err", err)
			return time.Time{}, false
		}
		cursor, _ = s.l.cfg.FSM.Cursor(r.Name)
	}
	catchup := r.Catchup
	if catchup <= 0 {
		catchup = DefaultCatchup
	}
	for range maxSlotsPerPass {
		slot, ok := sched.Next(cursor)
		if !ok {
			return time.Time{}, false
		}
		if slot.After(now) {
			return slot, true
		}
		lateBy := now.Sub(slot)
		c := StartRun{
			Key: RunKey(r.Name, slot), Rule: r.Name, Slot: slot, Zone: r.Timezone, Date: SlotDate(slot, r.Timezone),
			Late: lateBy > s.l.cfg.LateAfter, Skip: lateBy > catchup, RulesHash: hash, Now: now,
		}
		if _, err := s.l.propose(ctx, CmdStartRun, c); err != nil && !errors.Is(err, ErrRunExists) {
			s.l.log.Warn("cannot start run", "run", c.Key, "err", err)
			return now.Add(time.Second), true
		}
		switch {
		case c.Skip:
			s.l.log.Warn("slot missed beyond catch-up: skipped and alerted", "run", c.Key, "late_by", lateBy)
		case c.Late:
			s.l.log.Warn("slot fired late", "run", c.Key, "late_by", lateBy)
		}
		cursor = slot
	}
	return now, true // more slots to catch up: come back at once
}

func (s *scheduler) schedule(r Rule) (Schedule, error) {
	c, ok := s.schedules[r.Name]
	if ok && c.spec == r.Schedule && c.zone == r.Timezone && c.cal == r.Calendar && c.shift == r.Shift {
		return c.s, c.err
	}
	sched, err := s.l.cfg.ScheduleFunc(r)
	s.schedules[r.Name] = cachedSchedule{spec: r.Schedule, zone: r.Timezone, cal: r.Calendar, shift: r.Shift, s: sched, err: err}
	return sched, err
}

// planPending plans every run still planning — ours, or one an earlier
// leader left half done — each in its own goroutine so that one slow rule
// does not hold up the others.
func (s *scheduler) planPending(ctx context.Context) {
	for _, run := range s.l.cfg.FSM.PlanningRuns() {
		s.startPlanning(ctx, run)
	}
}

// startPlanning plans run in the background unless a planner has it.
func (s *scheduler) startPlanning(ctx context.Context, run *Run) {
	s.mu.Lock()
	busy := s.planning[run.Key]
	s.planning[run.Key] = true
	s.mu.Unlock()
	if busy {
		return
	}
	s.wg.Go(func() {
		defer func() {
			s.mu.Lock()
			delete(s.planning, run.Key)
			s.mu.Unlock()
		}()
		// A plan that failed to replicate is tried again here, after a
		// backoff: nothing else may wake the scheduler for a minute.
		for retry := planRetryMin; ; retry = min(2*retry, planRetryMax) {
			done, err := s.planOnce(ctx, run)
			if done {
				return
			}
			s.l.log.Warn("planning failed; will retry", "run", run.Key, "err", err, "in", retry)
			t := time.NewTimer(retry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	})
}

// Backoff between attempts to plan a run whose replication failed.
const (
	planRetryMin = time.Second
	planRetryMax = 30 * time.Second
)

// planOnce plans run under the planners' bound. done is false when it
// failed and is worth trying again.
func (s *scheduler) planOnce(ctx context.Context, run *Run) (done bool, err error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return true, nil
	}
	defer func() { <-s.sem }()
	// run was read before this planner took it: another one may have
	// finished it since.
	if cur, ok := s.l.cfg.FSM.Run(run.Key); !ok || cur.State != RunPlanning {
		return true, nil
	}
	err = s.l.plan(ctx, run)
	return err == nil || ctx.Err() != nil, err
}
