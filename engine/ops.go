package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Operators' commands: pause and resume a rule, send finished deliveries
// again by hand, fire a skipped or paused slot after all. All four came
// with FSM version 2 (CmdPauseRule, CmdResumeRule, CmdRetryDeliveries and
// CmdRefireRun in command.go).

// RunPaused means the slot came while its rule was paused; nothing was planned
// or sent. It fires only by hand (RefireRun). Append-only, like every
// RunState.
const RunPaused RunState = 5

// Pause is a paused rule as the replicated state records it.
type Pause struct {
	Rule string `json:"rule"`
	// By is the verified actor (a token's name, "loopback"); Note what
	// the client typed, if anything (FSM version 4).
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
	Note   string    `json:"note,omitempty"`
}

// PauseRule pauses a rule: its slots are recorded as paused, and its
// deliveries not yet sent are parked (out of the due index: the executor
// neither sees nor wakes for them) until ResumeRule. Pausing a paused rule
// changes nothing (ErrAlreadyPaused).
type PauseRule struct {
	Rule   string    `json:"rule"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	Now    time.Time `json:"now"`
	// Note: body version 2 (FSM version 4); see noteDowngrade.
	Note string `json:"note,omitempty"`
}

// ResumeRule releases a paused rule: its parked deliveries become due again
// (those past their deadline expire, alerted); slots paused over stay
// paused unless fired by hand.
type ResumeRule struct {
	Rule string    `json:"rule"`
	By   string    `json:"by"`
	Now  time.Time `json:"now"`
}

// RetryDeliveries sends failed or expired deliveries again: each keeps its
// id (its idempotency key) and gets a fresh attempt budget and Deadline.
// A delivery in any other state is left alone and reported.
type RetryDeliveries struct {
	IDs      []string  `json:"ids"`
	By       string    `json:"by"`
	Deadline time.Time `json:"deadline"`
	Now      time.Time `json:"now"`
	// Note: body version 2 (FSM version 4).
	Note string `json:"note,omitempty"`
}

// RetryResult is what Apply returns for RetryDeliveries.
type RetryResult struct {
	Retried []string    `json:"retried"`
	Skipped []RetrySkip `json:"skipped"`
}

// RetrySkip is a delivery RetryDeliveries left alone, and why.
type RetrySkip struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// RefireRun fires by hand a slot that was skipped (missed beyond catch-up)
// or paused: the run is planned now, as a manual fire, once. A run in any
// other state is refused with ErrRunExists.
type RefireRun struct {
	Key string    `json:"key"`
	By  string    `json:"by"`
	Now time.Time `json:"now"`
	// Note: body version 2 (FSM version 4).
	Note string `json:"note,omitempty"`
}

// The operators' writes record who made them (By, the actor the API
// verified: a token's name, never what a body says) and, apart, what the
// client typed (Note). Note came with body version 2 (FSM version 4) and
// is left out when empty, so such a body is a version-1 body too, which
// Admit writes while a member applies version 3 (the API leaves the note
// out then: noteDowngrade refuses the rest).
func noteDowngrade(to uint8, note string) bool { return to >= 2 || note == "" }

func (c *PauseRule) downgrade(to uint8) bool        { return noteDowngrade(to, c.Note) }
func (c *RetryDeliveries) downgrade(to uint8) bool  { return noteDowngrade(to, c.Note) }
func (c *RefireRun) downgrade(to uint8) bool        { return noteDowngrade(to, c.Note) }
func (c *ConfirmDirectory) downgrade(to uint8) bool { return noteDowngrade(to, c.Note) }

// Errors of the operators' commands.
var (
	ErrAlreadyPaused = errors.New("rule is already paused")
	ErrNotPaused     = errors.New("rule is not paused")
)

func (a applier) pauseRule(c PauseRule) any {
	if c.Rule == "" {
		return errors.New("pause: rule is required")
	}
	if _, ok := a.st.Paused[c.Rule]; ok {
		return ErrAlreadyPaused
	}
	for _, r := range a.st.Deliveries.records() {
		if r.getRule() == c.Rule && r.getState() == StatePending {
			d := r.delivery()
			a.st.dueTree(d.Priority).Delete(newDue(a.st.dueAt(d), d.ID))
		}
	}
	p := &Pause{Rule: c.Rule, By: c.By, At: c.Now, Reason: c.Reason, Note: c.Note}
	a.st.Paused[c.Rule] = p
	return p
}

func (a applier) resumeRule(c ResumeRule) any {
	if _, ok := a.st.Paused[c.Rule]; !ok {
		return ErrNotPaused
	}
	delete(a.st.Paused, c.Rule)
	for _, r := range a.st.Deliveries.records() {
		if r.getRule() == c.Rule && r.getState() == StatePending {
			a.st.indexDue(r.delivery())
		}
	}
	return nil
}

func (a applier) retryDeliveries(c RetryDeliveries) any {
	res := RetryResult{Retried: []string{}, Skipped: []RetrySkip{}}
	for _, id := range c.IDs {
		d, ok := a.st.Deliveries.Get(id)
		switch {
		case !ok:
			res.Skipped = append(res.Skipped, RetrySkip{id, "no such delivery"})
			continue
		case d.State == StateSent:
			res.Skipped = append(res.Skipped, RetrySkip{id, "already sent: never sent twice"})
			continue
		case d.State != StateFailed && d.State != StateExpired:
			res.Skipped = append(res.Skipped, RetrySkip{id, "is " + d.State.String() + ", not failed or expired"})
			continue
		case !c.Deadline.After(c.Now):
			res.Skipped = append(res.Skipped, RetrySkip{id, "the new deadline is not after now"})
			continue
		case len(d.Members) > 0:
			// Its members were counted and compensated one by one: retry
			// them, and each goes alone.
			res.Skipped = append(res.Skipped, RetrySkip{id, "a digest: retry the deliveries it folded (" + strings.Join(d.Members, ", ") + ")"})
			continue
		}
		was := d.State
		nd := *d
		nd.Digest = "" // a folded delivery retried by hand goes alone
		nd.State, nd.Attempts, nd.NextAt, nd.Deadline, nd.EndedAt = StatePending, 0, c.Now, c.Deadline, time.Time{}
		nd.RetriedBy, nd.RetryNote, nd.RetriedAt, nd.Retries = c.By, c.Note, c.Now, d.Retries+1
		a.st.putDelivery(&nd)
		a.dayStats(a.runDate(d), d.Rule, func(s *DayStats) {
			// No longer ended: counted again when it ends this time.
			if was == StateFailed {
				s.Failed--
			} else {
				s.Expired--
			}
			s.Retried++
		})
		res.Retried = append(res.Retried, id)
	}
	return res
}

func (a applier) refireRun(c RefireRun) any {
	run, ok := a.st.Runs.Get(c.Key)
	if !ok {
		return fmt.Errorf("no run %q", c.Key)
	}
	if run.State != RunSkipped && run.State != RunPaused {
		return ErrRunExists
	}
	was := run.State
	r := *run
	r.State, r.Manual, r.StartedAt, r.FiredBy, r.FireNote = RunPlanning, true, c.Now, c.By, c.Note
	a.st.putRun(&r)
	a.signalTasks() // wake the scheduler to plan it
	a.dayStats(r.date(), r.Rule, func(s *DayStats) {
		if was == RunSkipped {
			s.Skipped--
		} else {
			s.Paused--
		}
		s.Backfilled++
	})
	return nil
}

// parked reports whether a pending delivery waits for its rule's resume.
func (s *state) parked(d *Delivery) bool {
	_, ok := s.Paused[d.Rule]
	return ok && d.State == StatePending
}

// Paused returns the pause of rule, if it is paused.
func (f *FSM) Paused(rule string) (*Pause, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	p, ok := f.st.Paused[rule]
	return p, ok
}

// Pauses returns every paused rule's pause, by rule.
func (f *FSM) Pauses() []*Pause {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Pause, 0, len(f.st.Paused))
	for _, p := range f.st.Paused {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Pause) int {
		switch {
		case a.Rule < b.Rule:
			return -1
		case a.Rule > b.Rule:
			return 1
		}
		return 0
	})
	return out
}
