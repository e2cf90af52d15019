package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ProposeTimeout bounds one proposal of a leader loop (Leader.propose).
const ProposeTimeout = 10 * time.Second

// Schedule yields the slots of a rule's trigger.
type Schedule interface {
	// Next returns the first slot strictly after after, or false if none.
	Next(after time.Time) (time.Time, bool)
}

// LeaderConfig configures the leader-only parts: scheduler, planner,
// executor, housekeeper and directory refresher. They run only while this
// node leads. The fields every loop shares are here; each loop's own
// settings are in its config (embedded, so cfg.BatchSize reads as before),
// beside that loop's code and defaults: a new setting of one loop touches
// that loop's file.
type LeaderConfig struct {
	NodeID     string
	FSM        *FSM
	Replicator Replicator
	Rules      RuleSource
	Sender     Sender
	// ScheduleFunc builds the schedule of a rule (engine/schedule.New).
	ScheduleFunc func(Rule) (Schedule, error)
	NowFunc      func() time.Time
	Logger       *slog.Logger

	SchedulerConfig
	PlannerConfig
	ExecutorConfig
	HousekeeperConfig
	DirectoryConfig
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
	c.SchedulerConfig.setDefaults()
	c.PlannerConfig.setDefaults()
	c.ExecutorConfig.setDefaults()
	c.HousekeeperConfig.setDefaults()
	c.DirectoryConfig.setDefaults()
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
