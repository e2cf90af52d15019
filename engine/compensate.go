package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// maxCompensatePerPass bounds the on_failed hooks one pass runs.
const maxCompensatePerPass = 100

// Compensated records that the on_failed hooks of these deliveries ran.
type Compensated struct {
	IDs []string `json:"ids"`
}

func (a applier) compensated(c Compensated) any {
	n := 0
	for _, id := range c.IDs {
		if a.st.Compensate[id] {
			delete(a.st.Compensate, id)
			n++
		}
	}
	return n
}

// ToCompensate returns up to limit deliveries that ended failed or expired
// and whose rule's on_failed has not run yet, in id order.
func (f *FSM) ToCompensate(limit int) []*Delivery {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*Delivery
	for id := range f.st.Compensate {
		if d, ok := f.st.Deliveries[id]; ok {
			out = append(out, d)
		}
	}
	sortDeliveries(out)
	return out[:min(limit, len(out))]
}

// SubmitFunc schedules an API task; see SubmitterFrom.
type SubmitFunc func(ctx context.Context, t SubmitTask) (*Task, error)

type submitterKey struct{}

// SubmitterFrom returns the task submitter that the leader puts in the
// context of a RuleSource.OnFailed call, so that a rule's on_failed can
// schedule a follow-up (an API task). Now is stamped by the leader.
func SubmitterFrom(ctx context.Context) (SubmitFunc, bool) {
	f, ok := ctx.Value(submitterKey{}).(SubmitFunc)
	return f, ok
}

// WithSubmitter returns ctx carrying f for SubmitterFrom. The leader uses
// it for on_failed; tests of a RuleSource use it with a fake.
func WithSubmitter(ctx context.Context, f SubmitFunc) context.Context {
	return context.WithValue(ctx, submitterKey{}, f)
}

// compensate runs the rule's on_failed for deliveries that finally failed,
// outside Apply, then records that it ran. A leader that dies in between
// leaves them for the next one: the hook runs at least once.
func (l *Leader) compensate(ctx context.Context) {
	ds := l.cfg.FSM.ToCompensate(maxCompensatePerPass)
	if len(ds) == 0 {
		return
	}
	submit := SubmitFunc(func(ctx context.Context, t SubmitTask) (*Task, error) {
		t.Now = l.now()
		res, err := l.propose(ctx, CmdSubmitTask, t)
		if err != nil {
			return nil, err
		}
		return res.(SubmitResult).Task, nil
	})
	hctx := WithSubmitter(ctx, submit)
	ids := make([]string, 0, len(ds))
	for _, d := range ds {
		if ctx.Err() != nil {
			return
		}
		rc := RunContext{Rule: d.Rule, Key: d.RunKey, Slot: d.Slot}
		if run, ok := l.cfg.FSM.Run(d.RunKey); ok {
			rc.Zone, rc.Data = run.Zone, run.Data
			if loc, err := time.LoadLocation(run.Zone); err == nil {
				rc.Slot = d.Slot.In(loc)
			}
		}
		fd := FailedDelivery{ID: d.ID, Recipient: d.Recipient, State: d.State, Attempts: d.Attempts, Error: d.LastError}
		cctx, cancel := context.WithTimeout(hctx, l.cfg.PlanTimeout)
		err := l.cfg.Rules.OnFailed(cctx, d.Rule, rc, fd)
		cancel()
		if ctx.Err() != nil {
			return // cut short by the end of leadership: the next leader runs them
		}
		if err != nil {
			l.log.Warn("rule's on_failed failed", "rule", d.Rule, "delivery", d.ID, "err", err)
			l.raise(ctx, RaiseAlert{Cause: "on-failed:" + d.Rule, Rule: d.Rule,
				Message: fmt.Sprintf("on_failed of rule %s failed for delivery %s to %s: %v", d.Rule, d.ID, d.Recipient, err), Now: l.now()})
		}
		ids = append(ids, d.ID)
	}
	if _, err := l.propose(ctx, CmdCompensated, Compensated{IDs: ids}); err != nil {
		l.log.Warn("cannot record compensation; it will run again", "err", err)
	}
}

// notifyAlerts hands every alert that is new, or repeated after its
// interval, to the alert rule, and returns when to look again.
func (l *Leader) notifyAlerts(ctx context.Context, now time.Time) time.Time {
	wake := time.Time{}
	if _, ok := l.findRule(l.cfg.AlertRule); !ok {
		return wake // no rule to deliver with; alerts stay listed
	}
	for _, al := range l.cfg.FSM.Alerts() {
		if al.Acked || al.Rule == l.cfg.AlertRule || ctx.Err() != nil {
			continue // the alert rule's own failures would loop
		}
		if al.Notified > 0 {
			if !al.Last.After(al.NotifiedAt) {
				continue
			}
			if next := al.NotifiedAt.Add(l.cfg.AlertInterval); now.Before(next) {
				if wake.IsZero() || next.Before(wake) {
					wake = next
				}
				continue
			}
		}
		data, err := json.Marshal(alertData(al, l.cfg.DisplayZone))
		if err != nil {
			continue
		}
		_, err = l.propose(ctx, CmdNotifyAlert, NotifyAlert{ID: al.ID, Seq: al.Notified + 1, Interval: l.cfg.AlertInterval, Rule: l.cfg.AlertRule, Data: data, Now: now})
		if err != nil && ctx.Err() == nil {
			l.log.Debug("alert not notified", "alert", al.ID, "err", err)
		}
	}
	return wake
}

// reportLateRuns raises an alert for every run still planning LatePlan
// after its slot (once per run).
func (l *Leader) reportLateRuns(ctx context.Context, now time.Time) time.Time {
	wake := time.Time{}
	for _, r := range l.cfg.FSM.PlanningRuns() {
		// Planning counts from when the run started: a slot fired by hand
		// days later (a backfill) or a task submitted with a due time in
		// the past is deliberate, not late.
		start := r.Slot
		if r.StartedAt.After(start) {
			start = r.StartedAt
		}
		at := start.Add(l.cfg.LatePlan)
		if now.Before(at) {
			if wake.IsZero() || at.Before(wake) {
				wake = at
			}
			continue
		}
		cause := "late-run:" + r.Key
		if _, ok := l.cfg.FSM.Alert(AlertID(cause)); ok {
			continue
		}
		l.raise(ctx, RaiseAlert{Cause: cause, Rule: r.Rule,
			Message: fmt.Sprintf("run %s is still planning %s after it started", r.Key, now.Sub(start).Round(time.Second)), Now: now})
	}
	return wake
}
