package leader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// flakyLog fails the next proposals of the given command types, as a
// replication timeout would.
var errTimeout = errors.New("timed out enqueuing operation")

type flakyLog struct {
	*localLog
	mu   sync.Mutex
	fail map[engine.CommandType]int
}

func (f *flakyLog) Apply(ctx context.Context, cmd []byte) (any, error) {
	f.mu.Lock()
	t := engine.JSONTwin(engine.CommandType(cmd[0])) // a packed twin fails as its JSON command would
	if n := f.fail[t]; n > 0 {
		f.fail[t] = n - 1
		f.mu.Unlock()
		return nil, errTimeout
	}
	f.mu.Unlock()
	return f.localLog.Apply(ctx, cmd)
}

// A claim or an expiry that failed to replicate leaves work due now: the
// executor must look again soon, not at the one-minute cap (nothing else
// wakes it in a quiet cluster).
func TestExecutorRetriesSoonAfterAFailedProposal(t *testing.T) {
	t.Parallel()
	for _, ct := range []engine.CommandType{engine.CmdClaim, engine.CmdExpire} {
		t.Run(ct.String(), func(t *testing.T) {
			t.Parallel()
			start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
			s := newSim(t, start.Add(-time.Minute), engine.Rule{Name: "r", Schedule: "0 9 * * *", Channel: "mock", Deadline: time.Hour})
			s.rules.plan["r"] = to("alice")
			flaky := &flakyLog{localLog: s.log, fail: map[engine.CommandType]int{}}
			s.cfg.Replicator = flaky
			s.lead("n1")
			s.sched.runOnce(s.ctx) // the rule's schedule starts counting
			s.clock.Set(start)
			s.sched.runOnce(s.ctx)
			s.l.planner.wg.Wait()
			require.Len(t, s.log.fsm.RunDeliveries(engine.RunKey("r", start)), 1)
			now := start
			if ct == engine.CmdExpire {
				now = start.Add(2 * time.Hour) // past the deadline
				s.clock.Set(now)
			}
			flaky.fail[ct] = 1
			wake := s.exec.runOnce(s.ctx)
			require.LessOrEqual(t, wake.Sub(now), 5*time.Second, "a failed %s is retried only at %s", ct, wake)
			s.clock.Set(wake)
			s.exec.runOnce(s.ctx)
			s.exec.wg.Wait()
			d, _ := s.log.fsm.Delivery(engine.DeliveryID(engine.RunKey("r", start), "alice"))
			require.True(t, d.State.Final(), "still %s after the retry", d.State)
		})
	}
}

// refusingOnce refuses its first admissions for a second, like a full
// rate-limit bucket, then admits everything.
type refusingOnce struct {
	*simSender
	mu      sync.Mutex
	refuses int
}

func (r *refusingOnce) Admit(ch, to string, p heraldtype.Priority, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuses > 0 {
		r.refuses--
		return time.Second
	}
	return 0
}

// A new leader resends at once what an older term claimed and never
// settled. If the channel's limits hold one back for a moment, it goes
// when they allow, not when the old claim runs out.
func TestResendDelayedByRateLimitsGoesWhenAdmitted(t *testing.T) {
	t.Parallel()
	for _, failClaim := range []bool{false, true} {
		name := "rate limited"
		if failClaim {
			name = "claim failed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
			s := newSim(t, start)
			_, id := s.oneDelivery(start)
			s.apply(engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{id}, Leader: "n1", Now: start, Timeout: 30 * time.Second})

			flaky := &flakyLog{localLog: s.log, fail: map[engine.CommandType]int{}}
			sender := &refusingOnce{simSender: s.sender}
			s.cfg.Replicator, s.cfg.Sender = flaky, sender
			if failClaim {
				flaky.fail[engine.CmdClaim] = 1
			} else {
				sender.refuses = 1
			}
			s.clock.Set(start.Add(2 * time.Second))
			s.lead("n2")
			wake := s.exec.runOnce(s.ctx)
			s.exec.wg.Wait()
			require.Empty(t, s.sender.all())
			require.LessOrEqual(t, wake.Sub(s.clock.Now()), 5*time.Second)
			s.clock.Set(wake)
			s.exec.runOnce(s.ctx)
			s.exec.wg.Wait()
			got := s.sender.sentTo("alice")
			require.Len(t, got, 1, "resent at %s, when admitted", wake)
			require.Equal(t, id, got[0].key)
		})
	}
}

// slowSender answers only after its context ends, yet with outcomes: the
// channel did deliver, late.
type slowSender struct{ *simSender }

func (s *slowSender) Send(ctx context.Context, ch string, batch []heraldtype.Message) ([]heraldtype.Result, error) {
	<-ctx.Done()
	return s.simSender.Send(context.Background(), ch, batch)
}

// A send that outlives its claim raises stuck:CHANNEL; if the channel
// still answered, its outcomes are recorded rather than thrown away (which
// would send the messages again).
func TestSendPastItsClaimStillRecordsOutcomes(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := newSim(t, start)
	_, id := s.oneDelivery(start)
	s.cfg.Sender = &slowSender{s.sender}
	s.cfg.ClaimTimeout = 20 * time.Millisecond
	s.lead("n1")
	s.exec.runOnce(s.ctx)
	s.exec.wg.Wait()
	require.Len(t, alertsWith(s.log.fsm, "stuck:mock"), 1)
	d, _ := s.log.fsm.Delivery(id)
	require.Equal(t, engine.StateSent, d.State, "the channel's answer was thrown away")
}

// refusingChannel refuses every message of one channel, like a provider
// whose limit is used up for the next minute.
type refusingChannel struct {
	*simSender
	channel string
}

func (r *refusingChannel) Admit(ch, to string, p heraldtype.Priority, now time.Time) time.Duration {
	if ch == r.channel {
		return time.Minute
	}
	return r.simSender.Admit(ch, to, p, now)
}

// A pass looks only at what its free group slots can take, but not while
// a channel refuses: a rate-limited channel's backlog, oldest first, must
// not hide another channel's due messages pass after pass.
func TestRateLimitedBacklogDoesNotHideAnotherChannel(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := newSim(t, start)
	s.cfg.ClaimBatch, s.cfg.MaxSends = 10, 1 // two group slots: a pass looks at 20
	s.cfg.Sender = &refusingChannel{simSender: s.sender, channel: "slow"}
	plan := func(rule, channel string, n int, at time.Time) {
		key := engine.RunKey(rule, at)
		s.apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: rule, Slot: at, Now: at})
		var nds []engine.NewDelivery
		for i := range n {
			who := fmt.Sprintf("%s%d", rule, i)
			nds = append(nds, engine.NewDelivery{ID: engine.DeliveryID(key, who), Recipient: who, Channel: channel,
				Priority: heraldtype.PriorityNormal, NotBefore: at, Deadline: at.Add(time.Hour)})
		}
		s.apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: nds})
	}
	plan("old", "slow", 30, start.Add(-10*time.Minute))
	plan("mid", "mock", 3, start.Add(-5*time.Minute)) // neither the oldest 20 nor the newest
	plan("new", "slow", 10, start.Add(-time.Minute))
	s.lead("n1")
	for range 2 {
		s.exec.runOnce(s.ctx)
		s.exec.wg.Wait()
	}
	require.Len(t, s.sender.all(), 3, "the other channel's messages went")
}

// A pass that leaves due messages for lack of a free group slot does not
// leave them until its next wake-up: the group settling signals done, and
// the pass that starts takes the rest, at the same instant.
func TestBacklogGoesOnAsGroupsSettle(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := newSim(t, start)
	s.cfg.ClaimBatch, s.cfg.MaxSends = 10, 1 // two group slots: a pass sends at most 11 of a run
	key := engine.RunKey("r", start)
	s.apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: "r", Slot: start, Now: start})
	var nds []engine.NewDelivery
	for i := range 50 {
		who := fmt.Sprintf("u%d", i)
		nds = append(nds, engine.NewDelivery{ID: engine.DeliveryID(key, who), Recipient: who, Channel: "mock",
			Priority: heraldtype.PriorityNormal, NotBefore: start, Deadline: start.Add(time.Hour)})
	}
	s.apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: nds})
	s.lead("n1")
	s.step()
	sends := s.sender.all()
	require.Len(t, sends, 50, "every group that settled started the next pass")
	for _, m := range sends {
		require.Equal(t, start, m.at)
	}
}

// A channel that refuses what is due for the next minute does not make the
// executor sleep through another channel's message due in five seconds:
// the pass wakes at the first delivery due after now, not only at the
// index's minimum (which is due already, and waits).
func TestRefusedBacklogDoesNotDelayAMessageDueSoon(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := newSim(t, start)
	s.cfg.Sender = &refusingChannel{simSender: s.sender, channel: "slow"}
	plan := func(rule, channel string, at time.Time) string {
		key := engine.RunKey(rule, at)
		s.apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: rule, Slot: at, Now: at})
		id := engine.DeliveryID(key, "ann")
		s.apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{{ID: id, Recipient: "ann", Channel: channel,
			Priority: heraldtype.PriorityNormal, NotBefore: at, Deadline: at.Add(time.Hour)}}})
		return id
	}
	plan("limited", "slow", start.Add(-time.Minute))
	soon := plan("soon", "mock", start.Add(5*time.Second))
	s.lead("n1")
	wake := s.exec.runOnce(s.ctx)
	s.exec.wg.Wait()
	require.False(t, wake.After(start.Add(5*time.Second)), "wakes at %s", wake)

	s.advance(start.Add(time.Minute), time.Second)
	got := s.sender.all()
	require.Len(t, got, 1)
	require.Equal(t, soon, got[0].key)
	require.Equal(t, start.Add(5*time.Second), got[0].at, "on time")
}

// A claimed group goes to the channel in batches of at most BatchSize
// messages and MaxBatchBytes of payload; one message larger than that
// still goes, alone.
func TestBatchesBoundCountAndBytes(t *testing.T) {
	t.Parallel()
	x := &executor{l: &Leader{cfg: Config{ExecutorConfig: ExecutorConfig{BatchSize: 3}}}}
	sizes := []int{10, 10, 10, 10, MaxBatchBytes / 2, MaxBatchBytes / 2, 1, 2 * MaxBatchBytes, 5}
	var claimed []engine.Claimed
	byID := map[string]*engine.Delivery{}
	for i, n := range sizes {
		id := fmt.Sprint(i)
		claimed = append(claimed, engine.Claimed{ID: id})
		byID[id] = &engine.Delivery{ID: id, Payload: []byte(strings.Repeat("x", n))}
	}
	var got [][]string
	for part := range x.batches(claimed, byID) {
		var ids []string
		for _, c := range part {
			ids = append(ids, c.ID)
		}
		got = append(got, ids)
	}
	require.Equal(t, [][]string{{"0", "1", "2"}, {"3", "4"}, {"5", "6"}, {"7"}, {"8"}}, got)
	require.Equal(t, len(sizes), len(slices.Concat(got...)), "every message once")
}
