package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/enginetest/poll"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// localLog replicates by applying directly: a one-node "cluster".
type localLog struct {
	mu     sync.Mutex
	fsm    *engine.FSM
	index  uint64
	term   uint64
	leader bool
}

func (r *localLog) Apply(_ context.Context, cmd []byte) (any, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leader {
		return nil, engine.ErrNotLeader
	}
	r.index++
	return r.fsm.Apply(r.index, r.term, cmd), nil
}

func (r *localLog) VerifyLeader(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leader {
		return engine.ErrNotLeader
	}
	return nil
}

type staticRules struct {
	rules []engine.Rule
	fail  error
}

func (s *staticRules) Rules() []engine.Rule { return s.rules }

func (s *staticRules) Hash() string { return "h1" }

func (s *staticRules) Plan(_ context.Context, rule string, run engine.RunContext) ([]engine.Planned, error) {
	if s.fail != nil {
		return nil, s.fail
	}
	var out []engine.Planned
	for _, who := range []string{"alice", "bob"} {
		p, _ := json.Marshal(map[string]string{"msgtype": "text", "content": run.Slot.Format(time.RFC3339)})
		out = append(out, engine.Planned{Recipient: who, Payload: p})
	}
	return out, nil
}

func (s *staticRules) OnFailed(context.Context, string, engine.RunContext, engine.FailedDelivery, engine.SubmitFunc) error {
	return nil
}

// everySecond is a schedule with a slot on every whole second.
type everySecond struct{}

func (everySecond) Next(after time.Time) (time.Time, bool) {
	return after.Truncate(time.Second).Add(time.Second), true
}

type leaderBundle struct {
	log    *localLog
	sender *enginetest.Sender
	rules  *staticRules
	leader *Leader
}

func setupLeader(t *testing.T) *leaderBundle {
	b := &leaderBundle{
		log:    &localLog{fsm: engine.NewFSM(), term: 1, leader: true},
		sender: &enginetest.Sender{},
		rules:  &staticRules{rules: []engine.Rule{{Name: "tick", Schedule: "@every 1s", Channel: "mock"}}},
	}
	l, err := New(Config{
		NodeID: "n1", FSM: b.log.fsm, Replicator: b.log, Rules: b.rules, Sender: b.sender,
		ScheduleFunc: func(engine.Rule) (engine.Schedule, error) { return everySecond{}, nil },
	})
	require.NoError(t, err)
	b.leader = l
	return b
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, what, cond)
}

func TestLeaderFiresPlansAndSendsOncePerSlot(t *testing.T) {
	t.Parallel()
	b := setupLeader(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.leader.Run(ctx); close(done) }()
	waitFor(t, "three slots sent", func() bool {
		keys, _ := b.sender.Count()
		return keys >= 6
	})
	cancel()
	<-done

	keys, sends := b.sender.Count()
	require.Equal(t, keys, sends, "a key was sent twice")
	runs := b.log.fsm.Runs(nil)
	for i := 1; i < len(runs); i++ {
		require.Equal(t, time.Second, runs[i].Slot.Sub(runs[i-1].Slot), "slots must be consecutive")
	}
}

func TestLeaderRetriesThenSends(t *testing.T) {
	t.Parallel()
	b := setupLeader(t)
	b.rules.rules[0].Retry = []time.Duration{time.Millisecond, time.Millisecond}
	b.sender.FailNext(2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { b.leader.Run(ctx); close(done) }()
	waitFor(t, "a delivery sent after retries", func() bool {
		return len(b.log.fsm.Deliveries(func(d *engine.Delivery) bool { return d.State == engine.StateSent && d.Attempts > 1 })) > 0
	})
	cancel()
	<-done
}

func TestLeaderRecordsRuleErrors(t *testing.T) {
	t.Parallel()
	b := setupLeader(t)
	b.rules.fail = errors.New("boom at line 3")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { b.leader.Run(ctx); close(done) }()
	waitFor(t, "a failed run", func() bool {
		return len(b.log.fsm.Runs(func(r *engine.Run) bool { return r.State == engine.RunFailed })) > 0
	})
	cancel()
	<-done
	require.NotEmpty(t, b.log.fsm.Alerts())
	require.Contains(t, fmt.Sprint(b.log.fsm.Alerts()[0].Message), "boom at line 3")
}

// A new leader resends what an old one claimed and never settled, with the
// same idempotency key, and plans runs left half planned.
func TestNewLeaderFinishesOldLeadersWork(t *testing.T) {
	t.Parallel()
	b := setupLeader(t)
	now := time.Now().Truncate(time.Second)
	key := engine.RunKey("tick", now)
	fb := &fsmBundle{t: t, fsm: b.log.fsm, term: 1}
	fb.apply(engine.CmdInitCursor, engine.InitCursor{Rule: "tick", At: now})
	fb.apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: "tick", Slot: now, Now: now})
	fb.apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{{ID: engine.DeliveryID(key, "alice"), Recipient: "alice", Channel: "mock", NotBefore: now, Deadline: now.Add(time.Hour)}}})
	fb.claim("old", now, engine.DeliveryID(key, "alice"))
	b.log.index, b.log.term = fb.index, 2

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.leader.Run(ctx); close(done) }()
	waitFor(t, "the half-done run finished", func() bool {
		r, _ := b.log.fsm.Run(key)
		return r.State == engine.RunPlanned && len(b.log.fsm.Deliveries(func(d *engine.Delivery) bool { return d.RunKey == key && d.State == engine.StateSent })) == 2
	})
	cancel()
	<-done
	require.Equal(t, 1, b.sender.Sends(engine.DeliveryID(key, "alice")))
}

// fullChannelSender's channel is always full: Admit makes every message wait.
type fullChannelSender struct{ enginetest.Sender }

func (*fullChannelSender) Admit(string, string, heraldtype.Priority, time.Time) time.Duration {
	return time.Hour
}

// A rate-limited backlog must not make the executor spin: the next look is
// at the limiter's wait, not at the backlog's (past) due time.
func TestExecutorWaitsOutRateLimits(t *testing.T) {
	t.Parallel()
	b := setupLeader(t)
	b.leader.cfg.Sender = &fullChannelSender{}
	now := time.Now()
	fb := &fsmBundle{t: t, fsm: b.log.fsm, term: 1}
	key := engine.RunKey("tick", now)
	fb.apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: "tick", Slot: now, Now: now})
	fb.apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{
		{ID: engine.DeliveryID(key, "alice"), Recipient: "alice", Channel: "mock", NotBefore: now.Add(-time.Minute), Deadline: now.Add(2 * time.Hour)},
	}})
	b.log.index = fb.index
	x := newExecutor(b.leader)
	wake := x.runOnce(context.Background())
	require.True(t, wake.After(time.Now().Add(30*time.Second)), "next look at %s: the executor would spin", wake)
	d, _ := b.log.fsm.Delivery(engine.DeliveryID(key, "alice"))
	require.Equal(t, engine.StatePending, d.State, "nothing is claimed while the channel is full")
}

// blockingRules plans and runs on_failed until the context ends.
type blockingRules struct {
	staticRules
	planning chan struct{}
}

func (r *blockingRules) Plan(ctx context.Context, _ string, _ engine.RunContext) ([]engine.Planned, error) {
	select {
	case r.planning <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// blockingSender sends until the context ends.
type blockingSender struct {
	enginetest.Sender
	sending chan struct{}
}

func (s *blockingSender) Send(ctx context.Context, _ string, _ []heraldtype.Message) ([]heraldtype.Result, error) {
	select {
	case s.sending <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// Leadership lost while a plan and a send are in flight: Run returns,
// having stopped every goroutine it started (goleak checks in TestMain),
// and the send's claim is left for the next leader, not settled.
func TestLeaderStopsEverythingOnLeadershipLoss(t *testing.T) {
	t.Parallel()
	b := setupLeader(t)
	now := time.Now()
	key := engine.RunKey("tick", now.Add(-time.Second))
	fb := &fsmBundle{t: t, fsm: b.log.fsm, term: 1}
	fb.apply(engine.CmdInitCursor, engine.InitCursor{Rule: "tick", At: now.Add(time.Hour)})
	fb.apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: "tick", Slot: now.Add(-time.Second), Now: now})
	fb.apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{{ID: engine.DeliveryID(key, "alice"), Recipient: "alice", Channel: "mock", NotBefore: now.Add(-time.Second), Deadline: now.Add(time.Hour)}}})
	b.log.index = fb.index
	rules := &blockingRules{staticRules: *b.rules, planning: make(chan struct{}, 1)}
	sender := &blockingSender{sending: make(chan struct{}, 1)}
	b.leader.cfg.Rules, b.leader.cfg.Sender = rules, sender

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.leader.Run(ctx); close(done) }()
	for _, c := range []chan struct{}{rules.planning, sender.sending} {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatal("the plan and the send did not start")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after leadership was lost")
	}
	d, _ := b.log.fsm.Delivery(engine.DeliveryID(key, "alice"))
	require.Equal(t, engine.StateClaimed, d.State, "the ambiguous claim is left for the next leader")
	r, _ := b.log.fsm.Run(key)
	require.Equal(t, engine.RunPlanning, r.State, "the next leader plans it again")
}

// unsureLog is a leader whose quorum does not confirm it once.
type unsureLog struct {
	*localLog
	failVerify int
}

func (u *unsureLog) VerifyLeader(ctx context.Context) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.failVerify > 0 {
		u.failVerify--
		return errors.New("quorum did not answer in time")
	}
	return nil
}

// When leadership cannot be confirmed before a send, nothing is sent and
// the claims go back at once, spending no attempt: no 30-second wait for
// them to time out, no stuck-send alert.
func TestUnconfirmedLeadershipHandsClaimsBack(t *testing.T) {
	t.Parallel()
	b := setupLeader(t)
	u := &unsureLog{localLog: b.log, failVerify: 1}
	b.leader.cfg.Replicator = u
	now := time.Now()
	fb := &fsmBundle{t: t, fsm: b.log.fsm, term: 1}
	key := engine.RunKey("tick", now)
	fb.apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: "tick", Slot: now, Now: now})
	fb.apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{
		{ID: engine.DeliveryID(key, "alice"), Recipient: "alice", Channel: "mock", NotBefore: now.Add(-time.Second), Deadline: now.Add(time.Hour)},
	}})
	b.log.index = fb.index

	x := newExecutor(b.leader)
	x.runOnce(context.Background())
	x.wg.Wait()
	d, _ := b.log.fsm.Delivery(engine.DeliveryID(key, "alice"))
	require.Equal(t, engine.StatePending, d.State, "the claim was handed back")
	require.Zero(t, d.Attempts)
	require.WithinDuration(t, time.Now().Add(time.Second), d.NextAt, time.Second)
	require.Empty(t, b.log.fsm.Alerts())
	keys, _ := b.sender.Count()
	require.Zero(t, keys, "nothing was sent")
}

// TestLeaderWritesPackedOnlyOnceEveryMemberReadsThem: the leader's
// pipe (plan, claim, results) writes the JSON commands while a member's
// record says FSM version 1, and their packed twins from the moment every
// member's says 2.
func TestLeaderWritesPackedOnlyOnceEveryMemberReadsThem(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, slot.Add(-time.Second), engine.Rule{Name: "r", Schedule: "* * * * *", Channel: "mock"})
	tl := &typeLog{localLog: s.log}
	s.cfg.Replicator = tl
	s.rules.plan["r"] = to("alice", "bob")
	s.apply(engine.CmdUpsertMember, engine.Member{ID: "n1", FSMVersion: engine.FSMVersion})
	s.apply(engine.CmdUpsertMember, engine.Member{ID: "n2"}) // a build before FSM versions
	s.lead("n1")
	s.advance(slot.Add(30*time.Second), time.Second)
	up, err := engine.Encode(engine.CmdUpsertMember, engine.Member{ID: "n2", FSMVersion: engine.FSMVersion}) // upgraded
	require.NoError(t, err)
	_, err = tl.Apply(s.ctx, up)
	require.NoError(t, err)
	s.advance(slot.Add(90*time.Second), time.Second)

	tl.mu.Lock()
	defer tl.mu.Unlock()
	upgraded := false
	seen := map[engine.CommandType]bool{}
	for _, typ := range tl.types {
		if typ == engine.CmdUpsertMember {
			upgraded = true
		}
		if _, jsonTwin := engine.PackedTwin(typ); jsonTwin || typ == engine.CmdAddDeliveriesPacked || typ == engine.CmdClaimPacked || typ == engine.CmdRecordResultsPacked {
			seen[typ] = true
			_, isJSON := engine.PackedTwin(typ)
			require.Equal(t, !upgraded, isJSON, "%s written %s n2 was upgraded", typ, map[bool]string{false: "before", true: "after"}[upgraded])
		}
	}
	for _, typ := range []engine.CommandType{engine.CmdAddDeliveries, engine.CmdClaim, engine.CmdRecordResults, engine.CmdAddDeliveriesPacked, engine.CmdClaimPacked, engine.CmdRecordResultsPacked} {
		require.True(t, seen[typ], "%s was written", typ)
	}
}
