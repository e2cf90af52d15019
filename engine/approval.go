package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Approval before a mass send: a rule with approval = { over = N } whose
// run is planned for more than N people is held (HoldRun, 73, proposed by
// the planner before the run's deliveries). Its deliveries are replicated
// but not sent: they wait in the due index at their deadline, so that one
// not approved in time expires with the usual alert, and Claim refuses
// them. FinishPlan then leaves the run awaiting_approval and raises
// approval:RUN with the count and the first message. DecideRun (74)
// approves (the deliveries become due as planned) or rejects (they are
// cancelled). A run fired by hand must be approved by another token than
// the one that fired it. Both since FSM version 4.

// The run states of approval. Append-only, like every RunState.
const (
	// RunAwaitingApproval: planned, held for a person's approval; nothing
	// is sent until DecideRun approves it.
	RunAwaitingApproval RunState = 6
	// RunRejected: a held run a person rejected; its deliveries were
	// cancelled.
	RunRejected RunState = 7
)

// The states of an Approval.
const (
	ApprovalAwaiting = "awaiting"
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"
)

// Approval is a held run's hold and the decision on it.
type Approval struct {
	Over  int `json:"over"`  // the rule's approval.over
	Count int `json:"count"` // the people it was planned for
	// Preview is the payload of the run's first message.
	Preview json.RawMessage `json:"preview,omitempty"`
	HeldAt  time.Time       `json:"held_at"`
	State   string          `json:"state"`
	// By is who decided (the token's name, or the loopback actor), At when.
	By string    `json:"by,omitempty"`
	At time.Time `json:"at,omitzero"`
}

// HoldRun (73) holds a planning run for approval.
type HoldRun struct {
	RunKey  string          `json:"run_key"`
	Over    int             `json:"over"`
	Count   int             `json:"count"`
	Preview json.RawMessage `json:"preview"`
	Now     time.Time       `json:"now"`
}

// DecideRun (74) approves or rejects a run awaiting approval. By is the
// deciding token's name (the audit's actor).
type DecideRun struct {
	RunKey  string    `json:"run_key"`
	Approve bool      `json:"approve"`
	By      string    `json:"by"`
	Now     time.Time `json:"now"`
}

// DecideResult is what Apply returns for DecideRun.
type DecideResult struct {
	Run *Run `json:"run"`
	// Released counts the deliveries now due (approved); Cancelled those
	// cancelled (rejected); Expired those whose deadline passed while held.
	Released  int `json:"released"`
	Cancelled int `json:"cancelled"`
	Expired   int `json:"expired"`
}

// Errors of DecideRun.
var (
	ErrNotAwaitingApproval = errors.New("run is not awaiting approval")
	ErrSameToken           = errors.New("the token that fired a run by hand cannot approve it: another token must")
)

// MaxPreview bounds the preview a held run keeps.
const MaxPreview = 4096

// PreviewOf cuts a payload to MaxPreview for a hold: a cut payload is
// kept as a JSON string, so it stays valid JSON.
func PreviewOf(payload json.RawMessage) json.RawMessage {
	if len(payload) <= MaxPreview {
		return payload
	}
	k := MaxPreview
	for k > 0 && !utf8.RuneStart(payload[k]) {
		k--
	}
	b, _ := json.Marshal(string(payload[:k]) + "…") // a string always encodes
	return b
}

// held reports whether d waits for its run's approval.
func (s *state) held(d *Delivery) bool {
	return len(s.heldRuns) > 0 && d.State == StatePending && s.heldRuns[d.RunKey]
}

// dueAt is where d sits in the due index: its due time, or, while its run
// is held, its deadline (zero: nowhere), when it expires unless approved.
func (s *state) dueAt(d *Delivery) time.Time {
	if s.held(d) {
		return d.Deadline
	}
	return d.DueAt()
}

// moveRun re-indexes run's pending deliveries around change (holding or
// releasing it).
func (s *state) moveRun(run string, change func()) {
	ids := s.byRun[run]
	for _, id := range ids {
		d := s.Deliveries.At(id)
		if at := s.dueAt(d); !at.IsZero() && !s.parked(d) {
			s.dueTree(d.Priority).Delete(newDue(at, id))
		}
	}
	change()
	for _, id := range ids {
		s.indexDue(s.Deliveries.At(id))
	}
}

func (a applier) holdRun(c HoldRun) any {
	a.stamp(c.Now)
	run, ok := a.st.Runs.Get(c.RunKey)
	if !ok {
		return fmt.Errorf("hold run: no run %q", c.RunKey)
	}
	if run.State != RunPlanning || run.Approval != nil {
		return nil // held already (a plan repeated by a new leader), or past planning
	}
	r := *run
	r.Approval = &Approval{Over: c.Over, Count: c.Count, Preview: c.Preview, HeldAt: c.Now, State: ApprovalAwaiting}
	a.st.moveRun(r.Key, func() {
		a.st.putRun(&r)
		a.st.heldRuns[r.Key] = true
	})
	a.st.usesV4 = true
	return nil
}

// awaitApproval ends the planning of a held run (from finishPlan).
func (a applier) awaitApproval(r *Run, now time.Time) {
	r.State = RunAwaitingApproval
	preview := string(r.Approval.Preview)
	if len(preview) > 300 {
		k := 300
		for k > 0 && !utf8.RuneStart(preview[k]) {
			k--
		}
		preview = preview[:k] + "…"
	}
	a.st.raiseCause(AlertCause{AlertApproval, r.Key}, r.Rule, AlertParams{Run: r.Key, Slot: r.Slot, Count: r.Planned},
		fmt.Sprintf("run %s of rule %s is planned for %d people, over its approval limit of %d, and waits: herald runs approve %s (or reject). First message: %s",
			r.Key, r.Rule, r.Planned, r.Approval.Over, r.Key, preview), now)
}

func (a applier) decideRun(c DecideRun) any {
	a.stamp(c.Now)
	run, ok := a.st.Runs.Get(c.RunKey)
	if !ok {
		return fmt.Errorf("no run %q", c.RunKey)
	}
	if run.State != RunAwaitingApproval || run.Approval == nil {
		return ErrNotAwaitingApproval
	}
	if c.Approve && run.FiredToken != "" && c.By == run.FiredToken {
		return ErrSameToken
	}
	r := *run
	ap := *run.Approval
	ap.By, ap.At = c.By, c.Now
	res := DecideResult{Run: &r}
	for _, id := range a.st.byRun[r.Key] {
		if d := a.st.Deliveries.At(id); d.State == StateExpired {
			res.Expired++
		}
	}
	if c.Approve {
		ap.State, r.State = ApprovalApproved, RunPlanned
		r.Approval = &ap
		a.st.moveRun(r.Key, func() {
			a.st.putRun(&r)
			delete(a.st.heldRuns, r.Key)
		})
		for _, id := range a.st.byRun[r.Key] {
			if a.st.Deliveries.At(id).State == StatePending {
				res.Released++
			}
		}
	} else {
		ap.State, r.State = ApprovalRejected, RunRejected
		r.Approval = &ap
		a.st.moveRun(r.Key, func() {
			a.st.putRun(&r)
			delete(a.st.heldRuns, r.Key)
		})
		for _, id := range a.st.byRun[r.Key] {
			d := a.st.Deliveries.At(id)
			if d.State != StatePending {
				continue
			}
			nd := *d
			nd.State, nd.EndedAt, nd.LastError = StateCancelled, c.Now, "run rejected by "+c.By
			a.st.putDelivery(&nd)
			a.count(&nd)
			res.Cancelled++
		}
	}
	if al, ok := a.st.Alerts[AlertID(AlertCause{AlertApproval, r.Key}.Key())]; ok && !al.Acked {
		n := *al
		n.Acked = true // decided: nothing left to look at
		a.st.Alerts[n.ID] = &n
	}
	return res
}
