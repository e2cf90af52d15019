package leader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/backoff"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// Defaults of PlannerConfig.
const (
	PlanChunkDefault   = 500
	PlannersDefault    = 4
	PlanTimeoutDefault = time.Minute
	// MaxPlanAhead caps PlannerConfig.PlanAhead: the longer ahead, the
	// longer a planned run's deliveries sit in memory, and the older the
	// rules they were planned with.
	MaxPlanAhead = 10 * time.Minute
)

// PlannerConfig configures the planning of started runs.
type PlannerConfig struct {
	// PlanAhead is the most a scheduled slot's run is started before the
	// slot, so that it is planned and replicated when the slot comes and
	// its deliveries (not due before their send time) leave at once. The lead
	// is twice what the rule's last run took to plan, plus a second, up to
	// PlanAhead (all of it for a rule never planned yet). A run is planned
	// with the rules and data in force when it starts (recorded in
	// Run.RulesHash): an edit in between applies from the next slot.
	// Zero: at the slot. At most MaxPlanAhead.
	PlanAhead time.Duration

	PlanChunk   int           // deliveries per AddDeliveries; default PlanChunkDefault
	Planners    int           // runs planned at once; default PlannersDefault
	PlanTimeout time.Duration // default PlanTimeoutDefault

	// PlanObserver, when set, is told how long each run that this leader
	// planned took to evaluate and to replicate (metrics, herald bench).
	PlanObserver func(PlanTiming)
}

func (c *PlannerConfig) setDefaults() {
	setDefault(&c.PlanChunk, PlanChunkDefault)
	setDefault(&c.Planners, PlannersDefault)
	setDefault(&c.PlanTimeout, PlanTimeoutDefault)
	c.PlanAhead = min(max(c.PlanAhead, 0), MaxPlanAhead)
}

// planner plans started runs: it evaluates each run's rule and replicates
// its deliveries, each run in its own goroutine under PlannerConfig's
// Planners bound. One lives as long as its Leader, so that the plan-ahead
// lead learnt in one term (took) is there in the next.
type planner struct {
	l *Leader
	// took remembers how long each rule's last run took to plan (rule
	// name → time.Duration), for the plan-ahead lead.
	took     sync.Map
	mu       sync.Mutex
	planning map[string]bool // run keys being planned now
	sem      chan struct{}
	wg       sync.WaitGroup
}

func newPlanner(l *Leader) *planner {
	return &planner{l: l, planning: map[string]bool{}, sem: make(chan struct{}, l.cfg.Planners)}
}

// plan evaluates a run's rule and replicates its deliveries in chunks,
// then marks the run planned. Ids are deterministic, so planning a run that
// an earlier leader left half planned adds only what is missing.
func (p *planner) plan(ctx context.Context, run *engine.Run) error {
	rule, ok := p.l.findRule(run.Rule)
	if !ok {
		return p.finishPlan(ctx, run, "rule "+run.Rule+" is not loaded")
	}
	zone := run.Zone
	if zone == "" {
		zone = rule.Timezone
	}
	loc := engine.ZoneLocation(zone)
	rc := engine.RunContext{
		Rule: run.Rule, Key: run.Key, Slot: run.Slot.In(loc), Zone: loc.String(),
		Data: run.Data, Missed: p.l.cfg.FSM.Missed(run.Rule), DirectoryHash: run.DirectoryHash,
	}
	pctx, cancel := context.WithTimeout(ctx, p.l.cfg.PlanTimeout)
	evalStart := time.Now()
	planned, perr := p.l.cfg.Rules.Plan(pctx, rule.Name, rc)
	if cur, _ := p.l.cfg.FSM.Directory(); errors.Is(perr, engine.ErrDirectoryPending) && cur != nil && cur.Hash != run.DirectoryHash {
		// The run's snapshot was replaced in the log and this node no
		// longer keeps it (a run re-planned long after it started): the
		// one in force is the best there is.
		p.l.log.Warn("planning with the directory in force: the run's snapshot is gone", "run", run.Key,
			"run_directory", run.DirectoryHash, "directory", cur.Hash)
		rc.DirectoryHash = cur.Hash
		planned, perr = p.l.cfg.Rules.Plan(pctx, rule.Name, rc)
	}
	evaluate := time.Since(evalStart)
	planTimedOut := pctx.Err() != nil
	cancel()
	if ctx.Err() != nil {
		return ctx.Err() // leadership lost: the next leader plans it again
	}
	if errors.Is(perr, engine.ErrDirectoryPending) {
		return perr // the scheduler tries again in a moment
	}
	if perr != nil {
		return p.finishPlan(ctx, run, p.planFailure(run, perr, planTimedOut))
	}
	all, doomed := p.deliveries(run, rule, planned)
	replStart := time.Now()
	if rule.ApprovalOver > 0 && len(all) > rule.ApprovalOver {
		// Held before any delivery is replicated, so none can be claimed
		// before the hold (engine/approval.go).
		hold := engine.HoldRun{RunKey: run.Key, Over: rule.ApprovalOver, Count: len(all), Preview: engine.PreviewOf(all[0].Payload), Now: p.l.now()}
		if _, err := p.l.propose(ctx, engine.CmdHoldRun, hold); err != nil {
			return fmt.Errorf("hold %s for approval: %w", run.Key, err)
		}
	}
	if err := p.replicatePlan(ctx, run.Key, all); err != nil {
		return err
	}
	if len(doomed) > 0 {
		// Said now, when it is known, not only when the deadline passes:
		// the expiry's own alert cannot say why it was deferred.
		p.l.raise(ctx, engine.NewRaiseAlert(engine.AlertCause{Kind: engine.AlertQuietExpired, Subject: run.Key}, run.Rule, engine.AlertParams{Run: run.Key, Slot: run.Slot, Count: len(doomed)},
			fmt.Sprintf("%d message(s) of %s (rule %s) fall in quiet hours that end after their deadline; they will expire unsent at it: %s",
				len(doomed), run.Key, run.Rule, strings.Join(doomed, "; ")), p.l.now()))
	}
	err := p.finishPlan(ctx, run, "")
	if err == nil {
		p.took.Store(run.Rule, evaluate+time.Since(replStart))
	}
	if err == nil && p.l.cfg.PlanObserver != nil {
		p.l.cfg.PlanObserver(PlanTiming{Rule: run.Rule, RunKey: run.Key, Deliveries: len(all),
			Evaluate: evaluate, Replicate: time.Since(replStart)})
	}
	return err
}

// planFailure is what a run whose rule failed to plan records as its
// error (and its rule-error alert says): for a run stopped at a limit of
// the node (the rule's, or PlanTimeout when the whole plan outran it),
// the limit, that nothing was sent, and what to change. Logged here too,
// naming the rule: Apply cannot log.
func (p *planner) planFailure(run *engine.Run, perr error, planTimedOut bool) string {
	var le *engine.LimitError
	if !errors.As(perr, &le) && planTimedOut {
		le = &engine.LimitError{Limit: "plan time limit", Value: p.l.cfg.PlanTimeout.String(), Setting: "plan_timeout", Err: perr}
	}
	if le == nil {
		p.l.log.Warn("rule failed to plan its run; nothing was sent", "rule", run.Rule, "run", run.Key, "err", perr)
		return perr.Error()
	}
	p.l.log.Error("rule stopped at a limit while planning its run; nothing was sent", "rule", run.Rule, "run", run.Key,
		"limit", le.Limit, "value", le.Value, "err", le.Err)
	return fmt.Sprintf("planning %s; nothing was sent: %s", le.Error(), le.Remedy())
}

// finishPlan marks run planned, or failed with the rule's error (ruleErr
// not empty).
func (p *planner) finishPlan(ctx context.Context, run *engine.Run, ruleErr string) error {
	_, err := p.l.propose(ctx, engine.CmdFinishPlan, engine.FinishPlan{RunKey: run.Key, Error: ruleErr, Now: p.l.now()})
	return err
}

// deliveries turns a rule's plan into deliveries: deterministic ids and
// times (stagger, quiet hours, digest window), the rule's channel,
// priority, retry policy and deadline.
// doomed describes those deferred by quiet hours past their deadline.
func (p *planner) deliveries(run *engine.Run, rule engine.Rule, planned []engine.Planned) (out []engine.NewDelivery, doomed []string) {
	// A slot fired by hand after it passed (a backfill) counts its stagger
	// and deadline from when it was fired: from its slot, every message
	// would expire at once.
	base := run.Slot
	if at := run.StartedAt.Truncate(time.Second); run.Manual && at.After(base) {
		base = at
	}
	zone := cmp.Or(run.Zone, rule.Timezone)
	idKey := run.Key
	if rule.PerRecipient && run.TaskKey == "" {
		idKey = engine.LocalSlotKey(run.Rule, run.Slot, zone)
	}
	seen := make(map[string]bool, len(planned))
	out = make([]engine.NewDelivery, 0, len(planned))
	for i, pd := range planned {
		if pd.Recipient == "" || seen[pd.Recipient] {
			continue // one message per person per run
		}
		seen[pd.Recipient] = true
		t := rule.Timing(run.Key, base, pd, i, len(planned), zone)
		if t.Deferred != "" {
			p.l.log.Info("deferred by quiet hours", "run", run.Key, "recipient", pd.Recipient, "why", t.Deferred, "expires", t.Expires)
		}
		if t.Expires && len(doomed) < maxDoomedListed {
			why := "its digest window ends after it"
			if t.Deferred != "" {
				why = t.Deferred
			}
			doomed = append(doomed, fmt.Sprintf("%s (deadline %s, %s)", pd.Recipient, t.Deadline.Format(time.RFC3339), why))
		}
		out = append(out, engine.NewDelivery{
			ID:        engine.DeliveryID(idKey, pd.Recipient),
			Recipient: pd.Recipient,
			Channel:   rule.Channel,
			Payload:   pd.Payload,
			Priority:  cmp.Or(rule.Priority, heraldtype.PriorityNormal),
			NotBefore: t.NotBefore,
			Deadline:  t.Deadline,
			Retry:     rule.Retry,
		})
	}
	return out, doomed
}

// maxDoomedListed bounds the recipients one quiet-expired alert names.
const maxDoomedListed = 20

func (l *Leader) findRule(name string) (engine.Rule, bool) {
	for _, r := range l.cfg.Rules.Rules() {
		if r.Name == name {
			return r, true
		}
	}
	return engine.Rule{}, false
}

// planPipeline is how many AddDeliveries chunks of one run are in flight
// at once. Raft appends and fsyncs the proposals waiting together as one
// batch, so a large plan costs a few disk round trips, not one per chunk.
const planPipeline = 8

// replicatePlan proposes a run's deliveries in chunks, up to planPipeline
// at once. The chunks may commit in any order: AddDeliveries leaves ids
// already present alone, and FinishPlan comes only after all of them.
func (p *planner) replicatePlan(ctx context.Context, runKey string, all []engine.NewDelivery) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, planPipeline)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for start := 0; start < len(all); start += p.l.cfg.PlanChunk {
		chunk := all[start:min(start+p.l.cfg.PlanChunk, len(all))]
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if _, err := p.l.propose(ctx, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: runKey, Deliveries: chunk}); err != nil {
				select {
				case errs <- fmt.Errorf("replicate plan of %s: %w", runKey, err):
				default:
				}
				cancel()
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	return ctx.Err()
}

// planLeadMin is the least lead of a planned-ahead slot: what a small rule
// needs to be planned and replicated on a busy machine.
const planLeadMin = time.Second

// planLead is how long before its slot a run of rule is started: twice
// what its last run took to plan, plus planLeadMin, at most PlanAhead.
// A rule this leader has not planned yet counts its last planned run in
// the state; one never planned gets all of PlanAhead.
func (p *planner) planLead(rule string) time.Duration {
	if p.l.cfg.PlanAhead <= 0 {
		return 0
	}
	took, ok := p.took.Load(rule)
	if !ok {
		var last *engine.Run
		for _, r := range p.l.cfg.FSM.Runs(func(r *engine.Run) bool {
			return r.Rule == rule && r.State == engine.RunPlanned && !r.PlannedAt.IsZero()
		}) {
			last = r
		}
		d := time.Duration(-1) // never planned: remembered, so as not to look again each pass
		if last != nil {
			d = max(last.PlannedAt.Sub(last.StartedAt), 0)
		}
		took, _ = p.took.LoadOrStore(rule, d)
	}
	if took.(time.Duration) < 0 {
		return p.l.cfg.PlanAhead
	}
	return min(p.l.cfg.PlanAhead, 2*took.(time.Duration)+planLeadMin)
}

// planPending plans every run still planning — ours, or one an earlier
// leader left half done — each in its own goroutine so that one slow rule
// does not hold up the others.
func (p *planner) planPending(ctx context.Context) {
	for _, run := range p.l.cfg.FSM.PlanningRuns() {
		p.startPlanning(ctx, run)
	}
}

// startPlanning plans run in the background unless a planner has it.
func (p *planner) startPlanning(ctx context.Context, run *engine.Run) {
	p.mu.Lock()
	busy := p.planning[run.Key]
	p.planning[run.Key] = true
	p.mu.Unlock()
	if busy {
		return
	}
	p.wg.Go(func() {
		defer func() {
			p.mu.Lock()
			delete(p.planning, run.Key)
			p.mu.Unlock()
		}()
		// A plan that failed to replicate is tried again here, after a
		// backoff: nothing else may wake the scheduler for a minute.
		b := backoff.Doubling{Min: planRetryMin, Max: planRetryMax}
		for {
			done, err := p.planOnce(ctx, run)
			if done {
				return
			}
			retry := b.Next()
			p.l.log.Warn("planning failed; will retry", "run", run.Key, "err", err, "in", retry)
			if !backoff.Sleep(ctx, retry, nil) {
				return
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
func (p *planner) planOnce(ctx context.Context, run *engine.Run) (done bool, err error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return true, nil
	}
	defer func() { <-p.sem }()
	// run was read before this planner took it: another one may have
	// finished it since.
	if cur, ok := p.l.cfg.FSM.Run(run.Key); !ok || cur.State != engine.RunPlanning {
		return true, nil
	}
	err = p.plan(ctx, run)
	return err == nil || ctx.Err() != nil, err
}
