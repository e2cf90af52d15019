package leader

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/heraldhq/herald/engine"
)

// The housekeeper is the leader's third loop, beside the scheduler and the
// executor: the rules' on_failed hooks, alert delivery, late-run reports
// and retention. Everything here runs outside Apply and reaches the state
// only through proposals.

// Defaults of HousekeeperConfig (the retention defaults are in prune.go,
// beside the Prune command they fill).
const (
	AlertRuleDefault     = "ops_alert"
	AlertIntervalDefault = time.Hour
	LatePlanDefault      = 5 * time.Minute
)

// HousekeeperConfig configures the housekeeper: alerts, late-run reports
// and retention.
type HousekeeperConfig struct {
	// DisplayZone is the zone of the times in the alerts handed to the
	// alert rule (display_timezone); default the machine's zone.
	DisplayZone *time.Location
	// AlertRule is the rule that delivers Herald's own alerts (as API
	// tasks); default AlertRuleDefault. Alerts are only listed while it is
	// not loaded.
	AlertRule string
	// AlertInterval: an alert that repeats is delivered again at most this
	// often; default AlertIntervalDefault.
	AlertInterval time.Duration
	// LatePlan: a run still planning this long after its slot, or after
	// it started if that was later, is reported late (alert); default
	// LatePlanDefault.
	LatePlan time.Duration
	// Retention: finished deliveries older than this are pruned; default
	// RetentionDefault. LedgerRetention: how long pruned run keys are still
	// refused; default LedgerRetentionDefault (never less than Retention).
	// PruneEvery: how often the leader prunes; default PruneEveryDefault.
	Retention       time.Duration
	LedgerRetention time.Duration
	PruneEvery      time.Duration
	// AuditRetention: audit records older than this are pruned (at each
	// prune); default AuditRetentionDefault.
	AuditRetention time.Duration
}

func (c *HousekeeperConfig) setDefaults() {
	if c.DisplayZone == nil {
		c.DisplayZone = time.Local
	}
	setDefault(&c.AlertInterval, AlertIntervalDefault)
	setDefault(&c.LatePlan, LatePlanDefault)
	setDefault(&c.Retention, engine.RetentionDefault)
	setDefault(&c.LedgerRetention, engine.LedgerRetentionDefault)
	setDefault(&c.PruneEvery, engine.PruneEveryDefault)
	setDefault(&c.AuditRetention, engine.AuditRetentionDefault)
	if c.AlertRule == "" {
		c.AlertRule = AlertRuleDefault
	}
	if c.LedgerRetention < c.Retention {
		c.LedgerRetention = c.Retention
	}
}

// maxCompensatePerPass bounds the on_failed hooks one pass runs.
const maxCompensatePerPass = 100

// pruneAfterElection is how long a new leader waits before its first prune.
const pruneAfterElection = 5 * time.Minute

// housekeeper runs the leader's upkeep: the rules' on_failed hooks, alert
// delivery, late-run reports and retention. It wakes on every change of
// the state and on its own timers.
type housekeeper struct {
	l              *Leader
	nextPrune      time.Time
	pruneSuspended bool // a due prune waits for the clock (logged once)
}

func newHousekeeper(l *Leader) *housekeeper { return &housekeeper{l: l} }

func (h *housekeeper) run(ctx context.Context) {
	h.l.untilDone(ctx, h.runOnce)
}

// runOnce does what is due now and returns when to look again.
func (h *housekeeper) runOnce(ctx context.Context) time.Time {
	l := h.l
	now := l.now()
	wake := now.Add(time.Minute)
	earlier := func(t time.Time) {
		if !t.IsZero() && t.Before(wake) {
			wake = t
		}
	}
	h.compensate(ctx)
	earlier(h.notifyAlerts(ctx, now))
	earlier(h.reportLateRuns(ctx, now))
	suspended, why := l.suspended()
	switch {
	case h.nextPrune.IsZero():
		// Not at the very start of a term (elections come in bursts), but
		// soon after: a cluster whose leader moves every hour still prunes.
		h.nextPrune = now.Add(min(l.cfg.PruneEvery, pruneAfterElection))
	case !now.Before(h.nextPrune) && suspended:
		// Due, but suspended by the clock: it prunes once the clock agrees.
		if !h.pruneSuspended {
			l.log.Warn("prune suspended: the leader's clock is not trusted", "why", why)
		}
		h.pruneSuspended = true
		earlier(now.Add(l.cfg.ClockCheckEvery))
		return wake
	case !now.Before(h.nextPrune):
		h.pruneSuspended = false
		h.pruneOnce(ctx, now)
		h.nextPrune = now.Add(l.cfg.PruneEvery)
	}
	earlier(h.nextPrune)
	return wake
}

// compensate runs the rule's on_failed for deliveries that finally failed,
// outside Apply, then records that it ran. A leader that dies in between
// leaves them for the next one: the hook runs at least once.
func (h *housekeeper) compensate(ctx context.Context) {
	l := h.l
	ds := l.cfg.FSM.ToCompensate(maxCompensatePerPass)
	if len(ds) == 0 {
		return
	}
	submit := engine.SubmitFunc(func(ctx context.Context, t engine.SubmitTask) (*engine.Task, error) {
		t.Now = l.now()
		res, err := l.propose(ctx, engine.CmdSubmitTask, t)
		if err != nil {
			return nil, err
		}
		return res.(engine.SubmitResult).Task, nil
	})
	ids := make([]string, 0, len(ds))
	for _, d := range ds {
		if ctx.Err() != nil {
			return
		}
		rc := l.runContext(d)
		fd := engine.FailedDelivery{ID: d.ID, Recipient: d.Recipient, State: d.State, Attempts: d.Attempts, Error: d.LastError}
		cctx, cancel := context.WithTimeout(ctx, l.cfg.PlanTimeout)
		err := l.cfg.Rules.OnFailed(cctx, d.Rule, rc, fd, submit)
		cancel()
		if ctx.Err() != nil {
			return // cut short by the end of leadership: the next leader runs them
		}
		if err != nil {
			l.log.Warn("rule's on_failed failed", "rule", d.Rule, "delivery", d.ID, "err", err)
			l.raise(ctx, engine.NewRaiseAlert(engine.AlertCause{Kind: engine.AlertCompensationError, Subject: d.Rule}, d.Rule,
				engine.AlertParams{Run: d.RunKey, Slot: d.Slot, Recipient: d.Recipient, Error: err.Error()},
				fmt.Sprintf("on_failed of rule %s failed for delivery %s to %s: %v", d.Rule, d.ID, d.Recipient, err), l.now()))
		}
		ids = append(ids, d.ID)
	}
	if _, err := l.propose(ctx, engine.CmdCompensated, engine.Compensated{IDs: ids}); err != nil {
		l.log.Warn("cannot record compensation; it will run again", "err", err)
	}
}

// notifyAlerts hands every alert that is new, or repeated after its
// interval, to the alert rule, and returns when to look again.
func (h *housekeeper) notifyAlerts(ctx context.Context, now time.Time) time.Time {
	l := h.l
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
		data, err := json.Marshal(engine.AlertDataOf(al, l.cfg.DisplayZone))
		if err != nil {
			continue
		}
		_, err = l.propose(ctx, engine.CmdNotifyAlert, engine.NotifyAlert{ID: al.ID, Seq: al.Notified + 1, Interval: l.cfg.AlertInterval, Rule: l.cfg.AlertRule, Data: data, Now: now})
		if err != nil && ctx.Err() == nil {
			l.log.Debug("alert not notified", "alert", al.ID, "err", err)
		}
	}
	return wake
}

// reportLateRuns raises an alert for every run still planning LatePlan
// after its slot or its start, whichever is later (once per run).
func (h *housekeeper) reportLateRuns(ctx context.Context, now time.Time) time.Time {
	l := h.l
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
		cause := engine.AlertCause{Kind: engine.AlertRunLate, Subject: r.Key}
		if _, ok := l.cfg.FSM.Alert(engine.AlertID(cause.Key())); ok {
			continue
		}
		late := now.Sub(start).Round(time.Second)
		l.raise(ctx, engine.NewRaiseAlert(cause, r.Rule, engine.AlertParams{Run: r.Key, Slot: r.Slot, Late: late},
			fmt.Sprintf("run %s is still planning %s after it started", r.Key, late), now))
	}
	return wake
}

// pruneOnce proposes a Prune for now's retention horizon, and a
// PruneAudit for the audit trail's when it holds records (an empty trail
// needs no log entry, and while a member still runs a build without the
// trail the proposal would only be refused).
func (h *housekeeper) pruneOnce(ctx context.Context, now time.Time) {
	l := h.l
	retention, ledger, audit := l.retentions()
	if l.cfg.FSM.AuditLen() > 0 {
		if res, err := l.propose(ctx, engine.CmdPruneAudit, engine.PruneAudit{Before: now.Add(-audit), Now: now}); err != nil {
			l.log.Warn("cannot prune the audit trail", "err", err)
		} else if n := res.(int); n > 0 {
			l.log.Info("pruned audit records past retention", "records", n, "retention", audit)
		}
	}
	l.pruneEvents(ctx, now)
	res, err := l.propose(ctx, engine.CmdPrune, engine.Prune{Before: now.Add(-retention), LedgerBefore: now.Add(-ledger), Now: now})
	if err != nil {
		l.log.Warn("cannot prune finished deliveries", "err", err)
		return
	}
	if r := res.(engine.PruneResult); r != (engine.PruneResult{}) {
		l.log.Info("pruned past retention", "deliveries", r.Deliveries, "runs", r.Runs, "tasks", r.Tasks, "alerts", r.Alerts, "ledger", r.Ledger)
	}
}

// runContext is the run a delivery belongs to, as its rule's hooks see it
// (on_failed, on_action): the slot in the run's zone, the run's data.
func (l *Leader) runContext(d *engine.Delivery) engine.RunContext {
	rc := engine.RunContext{Rule: d.Rule, Key: d.RunKey, Slot: d.Slot}
	if run, ok := l.cfg.FSM.Run(d.RunKey); ok {
		rc.Zone, rc.Data = run.Zone, run.Data
		if loc, err := engine.LoadLocation(run.Zone); err == nil {
			rc.Slot = d.Slot.In(loc)
		}
	}
	return rc
}
