package leader

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/calendar"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/engine/schedule"
)

// This file is a deterministic harness for the leader: a fake clock, a
// one-node log whose term changes at will (a leader change), rules whose
// plans are Go functions, and a sender that records every send with the
// fake time. Tests drive the scheduler, executor and housekeeper through
// their runOnce, advancing the clock to the earliest wake-up any of them
// asked for: what a leader would do, without a sleep.

// simRules is a RuleSource whose rules plan with Go functions.
type simRules struct {
	mu    sync.Mutex
	rules []engine.Rule
	plan  map[string]func(engine.RunContext) []engine.Planned
	// fail, when it has the rule, is what its Plan answers instead: an
	// error, or nil to go on to plan. It gets the planner's context.
	fail     map[string]func(context.Context) error
	onFailed []engine.FailedDelivery
}

func (r *simRules) Rules() []engine.Rule {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.rules)
}

func (r *simRules) Hash() string { return "sim" }

func (r *simRules) Plan(ctx context.Context, rule string, run engine.RunContext) ([]engine.Planned, error) {
	r.mu.Lock()
	f, fail := r.plan[rule], r.fail[rule]
	r.mu.Unlock()
	if fail != nil {
		if err := fail(ctx); err != nil {
			return nil, err
		}
	}
	if f == nil {
		return nil, fmt.Errorf("no plan for %s", rule)
	}
	return f(run), nil
}

func (r *simRules) OnFailed(_ context.Context, _ string, _ engine.RunContext, d engine.FailedDelivery, _ engine.SubmitFunc) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onFailed = append(r.onFailed, d)
	return nil
}

// to plans the same text message for each of who.
func to(who ...string) func(engine.RunContext) []engine.Planned {
	return func(run engine.RunContext) []engine.Planned {
		out := make([]engine.Planned, len(who))
		for i, w := range who {
			out[i] = engine.Planned{Recipient: w, Payload: json.RawMessage(`{"msgtype":"text","content":"hi"}`)}
		}
		return out
	}
}

// sent is one message a simSender took, at the fake time.
type sent struct {
	at      time.Time
	key     string
	to      string
	payload string
	attempt int
}

// simSender records sends; failFunc decides an outcome other than sent;
// a limiter, when set, admits like the plugins host (a share of every
// bucket reserved for high priority).
type simSender struct {
	mu       sync.Mutex
	clock    *enginetest.Clock
	sends    []sent
	failFunc func(heraldtype.Message) (heraldtype.Status, bool)
	limiter  *rate.Limiter
	reserve  float64
}

func (s *simSender) Admit(_, _ string, p heraldtype.Priority, now time.Time) time.Duration {
	if s.limiter == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	need := 1.0
	if p != heraldtype.PriorityHigh {
		need += s.reserve
	}
	if short := need - s.limiter.TokensAt(now); short > 0 {
		return max(time.Duration(short/float64(s.limiter.Limit())*float64(time.Second)), time.Millisecond)
	}
	s.limiter.AllowN(now, 1)
	return 0
}

func (s *simSender) Send(_ context.Context, _ string, batch []heraldtype.Message) ([]heraldtype.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]heraldtype.Result, len(batch))
	for i, m := range batch {
		if s.failFunc != nil {
			if st, fail := s.failFunc(m); fail {
				out[i] = heraldtype.Result{ID: m.ID, Status: st, Error: "provider says no", Code: "50001"}
				continue
			}
		}
		s.sends = append(s.sends, sent{at: s.clock.Now(), key: m.IdempotencyKey, to: m.Recipient, payload: string(m.Payload), attempt: m.Attempt})
		out[i] = heraldtype.Result{ID: m.ID, Status: heraldtype.StatusSent, ProviderID: "p-" + m.ID}
	}
	return out, nil
}

func (s *simSender) sentTo(who string) []sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sent
	for _, x := range s.sends {
		if x.to == who {
			out = append(out, x)
		}
	}
	return out
}

func (s *simSender) all() []sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sends)
}

type sim struct {
	t      *testing.T
	ctx    context.Context
	clock  *enginetest.Clock
	log    *localLog
	rules  *simRules
	sender *simSender
	cfg    Config
	// nodeCfg, when set, adjusts the config of each node that leads (its
	// own clock, its view of the others').
	nodeCfg func(node string, cfg *Config)
	// The current leader's loops; nil while there is no leader.
	l     *Leader
	sched *scheduler
	exec  *executor
	house *housekeeper
}

func newSim(t *testing.T, start time.Time, rules ...engine.Rule) *sim {
	clock := enginetest.NewClock(start)
	s := &sim{
		t: t, ctx: t.Context(), clock: clock,
		log:    &localLog{fsm: engine.NewFSM(), term: 0, leader: true},
		rules:  &simRules{rules: rules, plan: map[string]func(engine.RunContext) []engine.Planned{}, fail: map[string]func(context.Context) error{}},
		sender: &simSender{clock: clock},
	}
	cals := calendar.NewRegistry()
	s.cfg = Config{
		FSM: s.log.fsm, Replicator: s.log, Rules: s.rules, Sender: s.sender, NowFunc: clock.Now,
		HousekeeperConfig: HousekeeperConfig{Retention: 10 * 366 * 24 * time.Hour}, // tests of pruning set their own
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		ScheduleFunc: func(r engine.Rule) (engine.Schedule, error) {
			sc, err := schedule.New(schedule.Spec{Cron: r.Schedule, Timezone: r.Timezone, Calendar: r.Calendar, Shift: r.Shift}, cals)
			if err != nil {
				return nil, err
			}
			return sc, nil
		},
	}
	return s
}

// lead makes node the leader in a new term, as after an election: its
// executor resends what an older term left claimed.
func (s *sim) lead(node string) {
	s.log.mu.Lock()
	s.log.term++
	s.log.leader = true
	s.log.mu.Unlock()
	cfg := s.cfg
	cfg.NodeID = node
	if s.nodeCfg != nil {
		s.nodeCfg(node, &cfg)
	}
	l, err := New(cfg)
	require.NoError(s.t, err)
	s.l, s.sched, s.exec, s.house = l, newScheduler(l), newExecutor(l), newHousekeeper(l)
	s.exec.resend = s.log.fsm.InFlight()
}

// oneDelivery plans a run of rule "r" at slot with one delivery, to
// alice through mock, due at once, and returns the run key and its id.
func (s *sim) oneDelivery(slot time.Time) (key, id string) {
	key = engine.RunKey("r", slot)
	id = engine.DeliveryID(key, "alice")
	s.apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: "r", Slot: slot, Now: slot})
	s.apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{
		{ID: id, Recipient: "alice", Channel: "mock", Priority: heraldtype.PriorityNormal, NotBefore: slot, Deadline: slot.Add(time.Hour)}}})
	return key, id
}

// outage: no leader until the next lead.
func (s *sim) outage() {
	s.log.mu.Lock()
	s.log.leader = false
	s.log.mu.Unlock()
	s.l, s.sched, s.exec, s.house = nil, nil, nil, nil
}

// step runs each loop once at the current fake time, waiting for the
// planning and sending it started, and returns the earliest wake-up.
func (s *sim) step() time.Time {
	if s.l == nil {
		return s.clock.Now().Add(time.Hour)
	}
	w0 := s.l.clock.runOnce(s.ctx)
	w1 := s.sched.runOnce(s.ctx)
	s.l.planner.wg.Wait()
	w2 := s.exec.runOnce(s.ctx)
	s.exec.wg.Wait()
	// As run does, a group settling (done) starts the next pass at once:
	// it takes what the last one left for lack of a free group slot.
	for s.groupSettled() {
		w2 = s.exec.runOnce(s.ctx)
		s.exec.wg.Wait()
	}
	w3 := s.house.runOnce(s.ctx)
	return minTime(w0, w1, w2, w3)
}

// groupSettled takes the executor's signal that a group settled, if any.
func (s *sim) groupSettled() bool {
	select {
	case <-s.exec.done:
		return true
	default:
		return false
	}
}

func minTime(ts ...time.Time) time.Time {
	m := ts[0]
	for _, t := range ts[1:] {
		if t.Before(m) {
			m = t
		}
	}
	return m
}

// advance runs the leader until the fake clock reaches until, jumping
// from one wake-up to the next (never by less than minStep, so a rate
// limit's millisecond waits do not make thousands of steps).
func (s *sim) advance(until time.Time, minStep time.Duration) {
	for {
		now := s.clock.Now()
		next := s.step()
		// Work done at this instant may have made more work due now
		// (a run planned, a task fired): settle it before moving on.
		if !next.After(now) {
			next = now.Add(minStep)
		}
		next = maxTime(next, now.Add(minStep))
		if next.After(until) {
			if now.Before(until) {
				s.clock.Set(until)
				s.step()
			}
			return
		}
		s.clock.Set(next)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (s *sim) apply(t engine.CommandType, body any) any {
	s.t.Helper()
	cmd, err := engine.Encode(t, body)
	require.NoError(s.t, err)
	res, err := s.log.Apply(s.ctx, cmd)
	require.NoError(s.t, err)
	return res
}

func (s *sim) runs(rule string) []*engine.Run {
	return s.log.fsm.Runs(func(r *engine.Run) bool { return r.Rule == rule })
}

func slotsIn(runs []*engine.Run, zone string) []string {
	loc, _ := time.LoadLocation(zone)
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.Slot.In(loc).Format("2006-01-02 15:04 MST")
	}
	return out
}

func alertsWith(f *engine.FSM, prefix string) []*engine.Alert {
	var out []*engine.Alert
	for _, a := range f.Alerts() {
		if strings.HasPrefix(a.Cause, prefix) {
			out = append(out, a)
		}
	}
	return out
}
