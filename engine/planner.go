package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// plan evaluates a run's rule and replicates its deliveries in chunks,
// then marks the run planned. Ids are deterministic, so planning a run that
// an earlier leader left half planned adds only what is missing.
func (l *Leader) plan(ctx context.Context, run *Run) error {
	rule, ok := l.findRule(run.Rule)
	if !ok {
		_, err := l.propose(ctx, CmdFinishPlan, FinishPlan{RunKey: run.Key, Error: "rule " + run.Rule + " is not loaded", Now: l.now()})
		return err
	}
	loc, err := time.LoadLocation(rule.Timezone)
	if err != nil {
		loc = time.UTC
	}
	rc := RunContext{
		Rule: run.Rule, Key: run.Key, Slot: run.Slot.In(loc), Zone: loc.String(),
		Data: run.Data, Missed: l.cfg.FSM.Missed(run.Rule), DirectoryHash: run.DirectoryHash,
	}
	pctx, cancel := context.WithTimeout(ctx, l.cfg.PlanTimeout)
	evalStart := time.Now()
	planned, perr := l.cfg.Rules.Plan(pctx, rule.Name, rc)
	if cur, _ := l.cfg.FSM.Directory(); errors.Is(perr, ErrDirectoryPending) && cur != nil && cur.Hash != run.DirectoryHash {
		// The run's snapshot was replaced in the log and this node no
		// longer keeps it (a run re-planned long after it started): the
		// one in force is the best there is.
		l.log.Warn("planning with the directory in force: the run's snapshot is gone", "run", run.Key,
			"run_directory", run.DirectoryHash, "directory", cur.Hash)
		rc.DirectoryHash = cur.Hash
		planned, perr = l.cfg.Rules.Plan(pctx, rule.Name, rc)
	}
	evaluate := time.Since(evalStart)
	cancel()
	if ctx.Err() != nil {
		return ctx.Err() // leadership lost: the next leader plans it again
	}
	if errors.Is(perr, ErrDirectoryPending) {
		return perr // the scheduler tries again in a moment
	}
	if perr != nil {
		_, err := l.propose(ctx, CmdFinishPlan, FinishPlan{RunKey: run.Key, Error: perr.Error(), Now: l.now()})
		return err
	}
	all := l.deliveries(run, rule, planned)
	replStart := time.Now()
	for start := 0; start < len(all); start += l.cfg.PlanChunk {
		chunk := all[start:min(start+l.cfg.PlanChunk, len(all))]
		if _, err := l.propose(ctx, CmdAddDeliveries, AddDeliveries{RunKey: run.Key, Deliveries: chunk}); err != nil {
			return fmt.Errorf("replicate plan of %s: %w", run.Key, err)
		}
	}
	_, err = l.propose(ctx, CmdFinishPlan, FinishPlan{RunKey: run.Key, Now: l.now()})
	if err == nil && l.cfg.PlanObserver != nil {
		l.cfg.PlanObserver(PlanTiming{Rule: run.Rule, RunKey: run.Key, Deliveries: len(all),
			Evaluate: evaluate, Replicate: time.Since(replStart)})
	}
	return err
}

// deliveries turns a rule's plan into deliveries: deterministic ids and
// stagger, the rule's channel, priority, retry policy and deadline.
func (l *Leader) deliveries(run *Run, rule Rule, planned []Planned) []NewDelivery {
	deadline := rule.Deadline
	if deadline <= 0 {
		deadline = DefaultDeadline
	}
	// A slot fired by hand after it passed (a backfill) counts its stagger
	// and deadline from when it was fired: from its slot, every message
	// would expire at once.
	base := run.Slot
	if at := run.StartedAt.Truncate(time.Second); run.Manual && at.After(base) {
		base = at
	}
	seen := make(map[string]bool, len(planned))
	out := make([]NewDelivery, 0, len(planned))
	for i, p := range planned {
		if p.Recipient == "" || seen[p.Recipient] {
			continue // one message per person per run
		}
		seen[p.Recipient] = true
		out = append(out, NewDelivery{
			ID:        DeliveryID(run.Key, p.Recipient),
			Recipient: p.Recipient,
			Channel:   rule.Channel,
			Payload:   p.Payload,
			Priority:  cmp.Or(rule.Priority, PriorityNormal),
			NotBefore: base.Add(rule.Stagger.Offset(run.Key, p.Recipient, i, len(planned))),
			Deadline:  base.Add(deadline),
			Retry:     rule.Retry,
		})
	}
	return out
}

func (l *Leader) findRule(name string) (Rule, bool) {
	for _, r := range l.cfg.Rules.Rules() {
		if r.Name == name {
			return r, true
		}
	}
	return Rule{}, false
}
