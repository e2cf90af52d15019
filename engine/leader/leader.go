package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/heraldhq/herald/engine"
)

// ProposeTimeout bounds one proposal of a leader loop (Leader.propose).
const ProposeTimeout = 10 * time.Second

// Config configures the leader-only parts: scheduler, planner,
// executor, housekeeper and directory refresher. They run only while this
// node leads. The fields every loop shares are here; each loop's own
// settings are in its config (embedded, so cfg.BatchSize reads as before),
// beside that loop's code and defaults: a new setting of one loop touches
// that loop's file.
type Config struct {
	NodeID     string
	FSM        *engine.FSM
	Replicator engine.Replicator
	Rules      engine.RuleSource
	Sender     engine.Sender
	// ScheduleFunc builds the schedule of a rule (engine/schedule.New).
	ScheduleFunc func(engine.Rule) (engine.Schedule, error)
	NowFunc      func() time.Time
	Logger       *slog.Logger

	SchedulerConfig
	PlannerConfig
	ExecutorConfig
	HousekeeperConfig
	DirectoryConfig
	ClockConfig
	EventsConfig
}

func (c *Config) setDefaults() error {
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
	c.ClockConfig.setDefaults()
	c.EventsConfig.setDefaults()
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
	cfg Config
	log *slog.Logger
	// planner outlives each term's scheduler: it keeps what rules took
	// to plan (the plan-ahead lead).
	planner *planner
	// clock is the watch of this node's clock against the members'
	// (clock.go): its verdict suspends firing, pruning and expiry.
	clock *clockWatch
	// mu guards the cfg fields Reconfigure changes (reconfigure.go).
	mu sync.Mutex
}

// New validates cfg and returns a Leader.
func New(cfg Config) (*Leader, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	l := &Leader{cfg: cfg, log: cfg.Logger.With("component", "leader")}
	l.planner = newPlanner(l)
	l.clock = newClockWatch(l)
	return l, nil
}

// Run runs the scheduler and executor until ctx is cancelled (leadership
// lost or node stopping). Cancelling ctx cancels every send in flight.
func (l *Leader) Run(ctx context.Context) {
	l.log.Info("leading: scheduler and executor started")
	var wg sync.WaitGroup
	// A first look at the clocks before any loop stamps or fires.
	next := l.clock.runOnce(ctx)
	wg.Go(func() {
		if wait(ctx, next, l.now()) {
			l.clock.run(ctx)
		}
	})
	s := newScheduler(l)
	x := newExecutor(l)
	h := newHousekeeper(l)
	wg.Go(func() { s.run(ctx) })
	wg.Go(func() { x.run(ctx) })
	wg.Go(func() { h.run(ctx) })
	ev := newEventLoop(l)
	wg.Go(func() { ev.run(ctx) })
	rc := newRecaller(l)
	wg.Go(func() { rc.run(ctx) })
	// The refresher runs without a directory too: a config reload may
	// add one while this node leads.
	d := &dirRefresher{l: l}
	wg.Go(func() { d.run(ctx) })
	wg.Wait()
	l.log.Info("no longer leading: scheduler and executor stopped")
}

// propose replicates one command and returns the state machine's answer.
// The burst's commands go packed once every member reads them (EncodeFor).
func (l *Leader) propose(ctx context.Context, t engine.CommandType, body any) (any, error) {
	cmd, err := engine.EncodeFor(t, body, l.cfg.FSM.OldestMemberFSM())
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

// now is the time the leader stamps and acts by: its clock, or the
// majority's while its own is off (clock.go).
func (l *Leader) now() time.Time { return l.cfg.NowFunc().Add(l.clock.current().correction) }

// suspended says whether firing, pruning and expiry wait for the clock (see
// clock.go), and why.
func (l *Leader) suspended() (bool, string) {
	v := l.clock.current()
	return v.suspended, v.why
}

// raise raises an alert. It cannot do more than log if the log will not
// take it (leadership lost): the next leader sees the same cause.
func (l *Leader) raise(ctx context.Context, a engine.RaiseAlert) {
	if _, err := l.propose(ctx, engine.CmdRaiseAlert, a); err != nil {
		l.log.Error("cannot raise alert", "cause", a.Cause, "message", a.Message, "err", err)
	}
}

// untilDone calls runOnce until ctx ends, again at the time it returned or
// at once when the replicated state changes: the shape of every loop that
// reacts to the state alone (housekeeper, events, recalls).
func (l *Leader) untilDone(ctx context.Context, runOnce func(context.Context) time.Time) {
	changed, unsubscribe := l.cfg.FSM.Subscribe()
	defer unsubscribe()
	for {
		if !wait(ctx, runOnce(ctx), l.now(), changed) {
			return
		}
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
