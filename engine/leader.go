package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Defaults of LeaderConfig.
const (
	BatchSizeDefault       = 200
	ClaimTimeoutDefault    = 30 * time.Second
	PlanChunkDefault       = 500
	PlannersDefault        = 4
	PlanTimeoutDefault     = time.Minute
	LateAfterDefault       = 5 * time.Second
	MaxSendsDefault        = 8
	ClaimBatchDefault      = 1000
	SendConcurrencyDefault = 16
	ProposeTimeout         = 10 * time.Second
	AlertRuleDefault       = "ops_alert"
	AlertIntervalDefault   = time.Hour
	LatePlanDefault        = 5 * time.Minute
	// MaxPlanAhead caps LeaderConfig.PlanAhead: the longer ahead, the
	// longer a planned run's deliveries sit in memory, and the older the
	// rules they were planned with.
	MaxPlanAhead = 10 * time.Minute
)

// MaxBatchBytes bounds the payload bytes of one channel batch (past its
// first message): a batch is one message of the plugin protocol, whose
// gRPC limit is 4 MiB.
const MaxBatchBytes = 1 << 20

// Schedule yields the slots of a rule's trigger.
type Schedule interface {
	// Next returns the first slot strictly after after, or false if none.
	Next(after time.Time) (time.Time, bool)
}

// LeaderConfig configures the leader-only parts: scheduler, planner and
// executor. They run only while this node leads.
type LeaderConfig struct {
	NodeID     string
	FSM        *FSM
	Replicator Replicator
	Rules      RuleSource
	Sender     Sender
	// ScheduleFunc builds the schedule of a rule (engine/schedule.New).
	ScheduleFunc func(Rule) (Schedule, error)
	// RulesChanged, when set, wakes the scheduler after a rule reload.
	RulesChanged <-chan struct{}
	NowFunc      func() time.Time
	Logger       *slog.Logger
	// DisplayZone is the zone of the times in the alerts handed to the
	// alert rule (display_timezone); default the machine's zone.
	DisplayZone *time.Location
	// PlanObserver, when set, is told how long each run that this leader
	// planned took to evaluate and to replicate (metrics, herald bench).
	PlanObserver func(PlanTiming)

	// PlanAhead is the most a scheduled slot's run is started before the
	// slot, so that it is planned and replicated when the slot comes and
	// its deliveries (held until their send time) leave at once. The lead
	// is twice what the rule's last run took to plan, plus a second, up to
	// PlanAhead (all of it for a rule never planned yet). A run is planned
	// with the rules and data in force when it starts (recorded in
	// Run.RulesHash): an edit in between applies from the next slot.
	// Zero: at the slot. At most MaxPlanAhead.
	PlanAhead time.Duration

	BatchSize int // deliveries per Send to a channel; default BatchSizeDefault
	// ClaimBatch is the most deliveries one Claim entry takes (sent in
	// batches of BatchSize after one leadership check, their results
	// recorded in one entry); default ClaimBatchDefault.
	ClaimBatch int
	// SendConcurrency bounds the channel batches in flight at once;
	// default SendConcurrencyDefault.
	SendConcurrency int
	ClaimTimeout    time.Duration // a claim not settled by then is ambiguous; default ClaimTimeoutDefault
	PlanChunk       int           // deliveries per AddDeliveries; default PlanChunkDefault
	Planners        int           // runs planned at once; default PlannersDefault
	PlanTimeout     time.Duration // default PlanTimeoutDefault
	LateAfter       time.Duration // a run started this long after its slot is flagged late
	MaxSends        int           // claim groups in flight at once; default MaxSendsDefault

	// AlertRule is the rule that delivers Herald's own alerts (as API
	// tasks); default AlertRuleDefault. Alerts are only listed while it is
	// not loaded.
	AlertRule string
	// AlertInterval: an alert that repeats is delivered again at most this
	// often; default AlertIntervalDefault.
	AlertInterval time.Duration
	// LatePlan: a run still planning this long after its slot is reported
	// late (alert); default LatePlanDefault.
	LatePlan time.Duration
	// Retention: finished deliveries older than this are pruned; default
	// RetentionDefault. LedgerRetention: how long pruned run keys are still
	// refused; default LedgerRetentionDefault. PruneEvery: how often the
	// leader prunes; default PruneEveryDefault.
	Retention       time.Duration
	LedgerRetention time.Duration
	PruneEvery      time.Duration
	// AuditRetention: audit records older than this are pruned (at each
	// prune); default AuditRetentionDefault.
	AuditRetention time.Duration

	// Directory, when set, is read every DirectoryInterval (default
	// DirectoryIntervalDefault) and replicated (dirsync.go). A refresh
	// that would remove more than DirectoryMaxRemoval of the people in
	// force (a share, default DirectoryMaxRemovalDefault; 1 never holds)
	// is held for an operator. DirectoryRefresh, when set, asks for a
	// refresh now.
	Directory           DirectorySource
	DirectoryInterval   time.Duration
	DirectoryMaxRemoval float64
	DirectoryRefresh    <-chan struct{}
}

func (c *LeaderConfig) setDefaults() error {
	if c.FSM == nil || c.Replicator == nil || c.Rules == nil || c.Sender == nil || c.ScheduleFunc == nil {
		return errors.New("leader: FSM, Replicator, Rules, Sender and ScheduleFunc are required")
	}
	if c.NodeID == "" {
		return errors.New("leader: NodeID is required")
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.DisplayZone == nil {
		c.DisplayZone = time.Local
	}
	setDefault(&c.BatchSize, BatchSizeDefault)
	setDefault(&c.ClaimTimeout, ClaimTimeoutDefault)
	setDefault(&c.PlanChunk, PlanChunkDefault)
	setDefault(&c.Planners, PlannersDefault)
	setDefault(&c.PlanTimeout, PlanTimeoutDefault)
	setDefault(&c.LateAfter, LateAfterDefault)
	setDefault(&c.MaxSends, MaxSendsDefault)
	setDefault(&c.ClaimBatch, ClaimBatchDefault)
	c.PlanAhead = min(max(c.PlanAhead, 0), MaxPlanAhead)
	setDefault(&c.SendConcurrency, SendConcurrencyDefault)
	setDefault(&c.AlertInterval, AlertIntervalDefault)
	setDefault(&c.LatePlan, LatePlanDefault)
	setDefault(&c.Retention, RetentionDefault)
	setDefault(&c.LedgerRetention, LedgerRetentionDefault)
	setDefault(&c.PruneEvery, PruneEveryDefault)
	setDefault(&c.AuditRetention, AuditRetentionDefault)
	setDefault(&c.DirectoryInterval, DirectoryIntervalDefault)
	if c.DirectoryMaxRemoval <= 0 {
		c.DirectoryMaxRemoval = DirectoryMaxRemovalDefault
	}
	if c.AlertRule == "" {
		c.AlertRule = AlertRuleDefault
	}
	if c.LedgerRetention < c.Retention {
		c.LedgerRetention = c.Retention
	}
	return nil
}

func setDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// PlanTiming is how long one run took to plan: the rule's evaluation (Lua)
// and the replication of its deliveries (AddDeliveries chunks and
// FinishPlan), both on the real clock.
type PlanTiming struct {
	Rule       string
	RunKey     string
	Deliveries int
	Evaluate   time.Duration
	Replicate  time.Duration
}

// Leader runs the leader-only loops. Build one per node; Run it each time
// the node gains leadership, with a context cancelled when it loses it.
type Leader struct {
	cfg LeaderConfig
	log *slog.Logger
	// planTook remembers how long each rule's last run took to plan (rule
	// name → time.Duration), for the plan-ahead lead.
	planTook sync.Map
}

// NewLeader validates cfg and returns a Leader.
func NewLeader(cfg LeaderConfig) (*Leader, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Leader{cfg: cfg, log: cfg.Logger.With("component", "leader")}, nil
}

// Run runs the scheduler and executor until ctx is cancelled (leadership
// lost or node stopping). Cancelling ctx cancels every send in flight.
func (l *Leader) Run(ctx context.Context) {
	l.log.Info("leading: scheduler and executor started")
	var wg sync.WaitGroup
	s := newScheduler(l)
	x := newExecutor(l)
	h := newHousekeeper(l)
	wg.Go(func() { s.run(ctx) })
	wg.Go(func() { x.run(ctx) })
	wg.Go(func() { h.run(ctx) })
	if l.cfg.Directory != nil {
		d := &dirRefresher{l: l}
		wg.Go(func() { d.run(ctx) })
	}
	wg.Wait()
	l.log.Info("no longer leading: scheduler and executor stopped")
}

// propose replicates one command and returns the state machine's answer.
// The burst's commands go packed once every member reads them (EncodeFor).
func (l *Leader) propose(ctx context.Context, t CommandType, body any) (any, error) {
	cmd, err := EncodeFor(t, body, l.cfg.FSM.OldestMemberFSM())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, ProposeTimeout)
	defer cancel()
	res, err := l.cfg.Replicator.Apply(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("propose %s: %w", t, err)
	}
	if e, ok := res.(error); ok {
		return nil, e
	}
	return res, nil
}

func (l *Leader) now() time.Time { return l.cfg.NowFunc() }

// raise raises an alert. It cannot do more than log if the log will not
// take it (leadership lost): the next leader sees the same cause.
func (l *Leader) raise(ctx context.Context, a RaiseAlert) {
	if _, err := l.propose(ctx, CmdRaiseAlert, a); err != nil {
		l.log.Error("cannot raise alert", "cause", a.Cause, "message", a.Message, "err", err)
	}
}

// wait blocks until next (on the real clock, at most a minute, since
// NowFunc may be a test's), ctx ends (false), or one of wake is signalled.
func wait(ctx context.Context, next time.Time, now time.Time, wake ...<-chan struct{}) bool {
	t := time.NewTimer(min(max(next.Sub(now), 0), time.Minute))
	defer t.Stop()
	var w0, w1 <-chan struct{}
	if len(wake) > 0 {
		w0 = wake[0]
	}
	if len(wake) > 1 {
		w1 = wake[1]
	}
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-w0:
	case <-w1:
	}
	return true
}
