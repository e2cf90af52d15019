package leader

import (
	"context"
	"errors"
	"time"

	"github.com/heraldhq/herald/engine"
)

// LateAfterDefault is SchedulerConfig.LateAfter's default.
const LateAfterDefault = 5 * time.Second

// SchedulerConfig configures the scheduler, which fires rules' slots and
// tasks (its one required part, ScheduleFunc, is in Config with the
// other ports).
type SchedulerConfig struct {
	// RulesChanged, when set, wakes the scheduler after a rule reload.
	RulesChanged <-chan struct{}
	LateAfter    time.Duration // a run started this long after its slot is flagged late
}

func (c *SchedulerConfig) setDefaults() {
	setDefault(&c.LateAfter, LateAfterDefault)
}

// maxSlotsPerPass bounds how many slots of one rule a scheduler pass fires,
// so a long outage of a fast schedule cannot stall the others.
const maxSlotsPerPass = 1000

// scheduler fires rule slots and due tasks (StartRun) and hands the runs
// still planning to the Leader's planner. It lives
// only while its node leads.
type scheduler struct {
	l         *Leader
	schedules map[string]cachedSchedule // by rule name and zone
}

type cachedSchedule struct {
	spec, zone, cal, shift string
	s                      engine.Schedule
	err                    error
}

func newScheduler(l *Leader) *scheduler {
	return &scheduler{
		l:         l,
		schedules: map[string]cachedSchedule{},
	}
}

func (s *scheduler) run(ctx context.Context) {
	defer s.l.planner.wg.Wait()
	tasks, unsubscribe := s.l.cfg.FSM.Subscribe(engine.TasksChange)
	defer unsubscribe()
	for {
		next := s.runOnce(ctx)
		if !wait(ctx, next, s.l.now(), s.l.cfg.RulesChanged, tasks) {
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
	if suspended, _ := s.l.suspended(); suspended {
		// No slot or task fires by a clock the majority does not share:
		// the runs already started are still planned.
		s.l.planner.planPending(ctx)
		return now.Add(s.l.clock.recheck())
	}
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
	s.l.planner.planPending(ctx)
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
		c := engine.TaskRun(t, r.Timezone, hash, now, s.l.cfg.LateAfter)
		if _, err := s.l.propose(ctx, engine.CmdStartRun, c); err != nil {
			if !errors.Is(err, engine.ErrRunExists) {
				s.l.log.Warn("cannot fire task", "task", t.Key, "err", err)
				return now.Add(time.Second), true
			}
			if tk, ok := s.l.cfg.FSM.Task(t.Key); ok && tk.State == engine.TaskPending {
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
		// submitted just now, and the TasksChange subscription wakes us
		// at once). Looking again at once would spin.
		return now.Add(time.Second), true
	}
	return next, ok
}
