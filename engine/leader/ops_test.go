package leader

// Named after engine/ops.go, not a file here: the operators' commands
// (pause, resume, retry, backfill) as the leader's loops carry them out.

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// sendsBetween counts the sends the sim's sender took in (from, to]; a
// send at from itself was before what happened at from.
func sendsBetween(s *sim, from, to time.Time) int {
	n := 0
	for _, x := range s.sender.all() {
		if x.at.After(from) && !x.at.After(to) {
			n++
		}
	}
	return n
}

// requireEachSentOnce: no idempotency key went twice.
func requireEachSentOnce(t *testing.T, s *sim) {
	t.Helper()
	seen := map[string]int{}
	for _, x := range s.sender.all() {
		seen[x.key]++
	}
	for k, n := range seen {
		require.Equal(t, 1, n, "delivery %s sent %d times", k, n)
	}
}

// TestPauseAcrossLeaderChange: a rule firing every second is paused, the
// leader changes while it is paused, and it is resumed. Nothing goes out
// while it is paused; its slots are recorded as paused; the message parked
// at the pause goes out once after the resume, and nothing is doubled.
func TestPauseAcrossLeaderChange(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	// bob's message leaves 3 s after each slot: one is always waiting.
	s := newSim(t, start, engine.Rule{Name: "tick", Schedule: "@every 1s", Channel: "mock", Stagger: engine.Stagger{Batches: 2, Spacing: 3 * time.Second}})
	s.rules.plan["tick"] = to("alice", "bob")
	s.lead("n1")
	s.advance(start.Add(5*time.Second), time.Millisecond)
	require.NotEmpty(t, s.sender.all())

	pausedAt := s.clock.Now()
	p := s.apply(engine.CmdPauseRule, engine.PauseRule{Rule: "tick", By: "ops@test", Reason: "holiday", Now: pausedAt})
	require.Equal(t, "holiday", p.(*engine.Pause).Reason)
	require.ErrorIs(t, s.apply(engine.CmdPauseRule, engine.PauseRule{Rule: "tick", By: "x", Now: pausedAt}).(error), engine.ErrAlreadyPaused)
	parked := s.log.fsm.Deliveries(func(d *engine.Delivery) bool { return d.State == engine.StatePending })
	require.NotEmpty(t, parked, "bob's staggered messages wait")

	// The executor has nothing to do and says so: no wake-up before the
	// minute for what it holds.
	require.Equal(t, pausedAt.Add(time.Minute), s.exec.runOnce(s.ctx))

	s.advance(pausedAt.Add(4*time.Second), time.Millisecond)
	// The parked messages are due by now, and still no wake-up for them.
	require.Equal(t, s.clock.Now().Add(time.Minute), s.exec.runOnce(s.ctx))
	s.lead("n2") // a leader change while paused
	s.advance(pausedAt.Add(8*time.Second), time.Millisecond)
	require.Zero(t, sendsBetween(s, pausedAt, s.clock.Now()), "nothing is sent while paused")
	var paused []*engine.Run
	for _, r := range s.runs("tick") {
		if r.State == engine.RunPaused {
			paused = append(paused, r)
			require.Empty(t, s.log.fsm.RunDeliveries(r.Key))
		}
	}
	require.GreaterOrEqual(t, len(paused), 7, "every slot while paused is recorded as paused")
	require.Equal(t, len(paused), s.log.fsm.DayStats("2026-12-01")["tick"].Paused)

	resumedAt := s.clock.Now()
	require.Nil(t, s.apply(engine.CmdResumeRule, engine.ResumeRule{Rule: "tick", By: "ops@test", Now: resumedAt}))
	s.lead("n3") // and another leader right after
	s.advance(resumedAt.Add(6*time.Second), time.Millisecond)

	requireEachSentOnce(t, s)
	for _, d := range parked {
		cur, _ := s.log.fsm.Delivery(d.ID)
		require.Equal(t, engine.StateSent, cur.State, "held %s goes out after the resume", d.ID)
		require.False(t, cur.SentAt.Before(resumedAt))
	}
	// Slots after the resume are sent, the paused ones stay paused.
	after := 0
	for _, r := range s.runs("tick") {
		if r.Slot.After(resumedAt) && r.State == engine.RunPlanned {
			after++
		}
	}
	require.GreaterOrEqual(t, after, 5)
	for _, r := range paused {
		cur, _ := s.log.fsm.Run(r.Key)
		require.Equal(t, engine.RunPaused, cur.State)
	}
}

// TestParkedPastDeadlineExpires: a message parked by a pause past its deadline
// expires (alerted) when the rule is resumed, rather than going out late.
func TestParkedPastDeadlineExpires(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, start)
	s.lead("n1")
	_, id := s.oneDeliveryAt(start.Add(time.Minute))
	s.apply(engine.CmdPauseRule, engine.PauseRule{Rule: "r", By: "ops", Now: start})
	s.advance(start.Add(2*time.Hour), time.Second)
	d, _ := s.log.fsm.Delivery(id)
	require.Equal(t, engine.StatePending, d.State, "held, not expired, while paused")
	s.apply(engine.CmdResumeRule, engine.ResumeRule{Rule: "r", By: "ops", Now: s.clock.Now()})
	s.advance(s.clock.Now().Add(time.Second), time.Second)
	d, _ = s.log.fsm.Delivery(id)
	require.Equal(t, engine.StateExpired, d.State)
	require.Empty(t, s.sender.all())
}

// oneDeliveryAt is oneDelivery due at notBefore, with an hour's deadline.
func (s *sim) oneDeliveryAt(notBefore time.Time) (key, id string) {
	key = engine.RunKey("r", notBefore)
	id = engine.DeliveryID(key, "alice")
	s.apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: "r", Slot: notBefore, Now: s.clock.Now()})
	s.apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{
		{ID: id, Recipient: "alice", Channel: "mock", Priority: heraldtype.PriorityNormal, NotBefore: notBefore, Deadline: notBefore.Add(time.Hour)}}})
	return key, id
}

// TestPauseSurvivesSnapshot: a pause is in the snapshot, and a restored
// node holds the same deliveries.
func TestPauseSurvivesSnapshot(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, start)
	_, id := s.oneDeliveryAt(start)
	s.apply(engine.CmdPauseRule, engine.PauseRule{Rule: "r", By: "ops", Reason: "maintenance", Now: start})
	require.Empty(t, s.log.fsm.Due(start.Add(time.Hour), 10))

	snap, err := s.log.fsm.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, snap.Persist(&buf))
	g := engine.NewFSM()
	require.NoError(t, g.Restore(&buf))
	p, ok := g.Paused("r")
	require.True(t, ok)
	require.Equal(t, "maintenance", p.Reason)
	require.Empty(t, g.Due(start.Add(time.Hour), 10), "held after a restore too")
	g.Apply(100, 1, mustEncode(t, engine.CmdResumeRule, engine.ResumeRule{Rule: "r", By: "ops", Now: start}))
	due := g.Due(start.Add(time.Minute), 10)
	require.Len(t, due, 1)
	require.Equal(t, id, due[0].ID)
}

func mustEncode(t testing.TB, ct engine.CommandType, body any) []byte {
	t.Helper()
	b, err := engine.Encode(ct, body)
	require.NoError(t, err)
	return b
}

// TestRetryAfterChannelFixed: a delivery that failed while the channel
// was broken is retried by hand once it is fixed: sent once, with the same
// id, a fresh attempt budget and deadline, and who retried it. A sent
// delivery is never retried.
func TestRetryAfterChannelFixed(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, start)
	broken := true
	s.sender.failFunc = func(heraldtype.Message) (heraldtype.Status, bool) { return heraldtype.StatusConfig, broken }
	s.lead("n1")
	_, id := s.oneDeliveryAt(start)
	s.advance(start.Add(time.Minute), time.Second)
	d, _ := s.log.fsm.Delivery(id)
	require.Equal(t, engine.StateFailed, d.State)
	require.Equal(t, 1, s.log.fsm.DayStats("2026-12-01")["r"].Failed)

	s.sender.mu.Lock()
	broken = false
	s.sender.mu.Unlock()
	now := s.clock.Now()
	res := s.apply(engine.CmdRetryDeliveries, engine.RetryDeliveries{IDs: []string{id, "nope"}, By: "ops@test", Deadline: now.Add(2 * time.Hour), Now: now}).(engine.RetryResult)
	require.Equal(t, []string{id}, res.Retried)
	require.Equal(t, []engine.RetrySkip{{ID: "nope", Reason: "no such delivery"}}, res.Skipped)
	d, _ = s.log.fsm.Delivery(id)
	require.Equal(t, engine.StatePending, d.State)
	require.Zero(t, d.Attempts)
	require.Equal(t, "ops@test", d.RetriedBy)
	s.lead("n2") // a leader change in between changes nothing
	s.advance(now.Add(time.Minute), time.Second)
	d, _ = s.log.fsm.Delivery(id)
	require.Equal(t, engine.StateSent, d.State)
	require.Len(t, s.sender.all(), 1, "delivered once")
	require.Equal(t, id, s.sender.all()[0].key, "the same idempotency key")
	st := s.log.fsm.DayStats("2026-12-01")["r"]
	require.Equal(t, 0, st.Failed)
	require.Equal(t, 1, st.Sent)
	require.Equal(t, 1, st.Retried)

	res = s.apply(engine.CmdRetryDeliveries, engine.RetryDeliveries{IDs: []string{id}, By: "ops", Deadline: now.Add(3 * time.Hour), Now: s.clock.Now()}).(engine.RetryResult)
	require.Empty(t, res.Retried)
	require.Equal(t, "already sent: never sent twice", res.Skipped[0].Reason)
	s.advance(s.clock.Now().Add(time.Minute), time.Second)
	require.Len(t, s.sender.all(), 1)
}

// TestBackfillSkippedSlot: a slot skipped after an outage longer than its
// catch-up is fired by hand: planned and sent once; a second fire is
// refused.
func TestBackfillSkippedSlot(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := newSim(t, day.Add(7*time.Hour+30*time.Minute), engine.Rule{Name: "hourly", Schedule: "0 * * * *", Channel: "mock", Catchup: time.Hour})
	s.rules.plan["hourly"] = to("alice")
	s.lead("n1")
	s.advance(day.Add(7*time.Hour+50*time.Minute), time.Second)
	s.outage()
	s.clock.Set(day.Add(9*time.Hour + 50*time.Minute))
	s.lead("n2")
	s.advance(day.Add(10*time.Hour+5*time.Minute), time.Second)
	key := engine.RunKey("hourly", day.Add(8*time.Hour))
	run, _ := s.log.fsm.Run(key)
	require.Equal(t, engine.RunSkipped, run.State)
	before := len(s.sender.all())

	now := s.clock.Now()
	require.Nil(t, s.apply(engine.CmdRefireRun, engine.RefireRun{Key: key, By: "ops@test", Now: now}))
	require.ErrorIs(t, s.apply(engine.CmdRefireRun, engine.RefireRun{Key: key, By: "ops@test", Now: now}).(error), engine.ErrRunExists, "once")
	s.lead("n3")
	s.advance(now.Add(time.Minute), time.Second)
	run, _ = s.log.fsm.Run(key)
	require.Equal(t, engine.RunPlanned, run.State)
	require.True(t, run.Manual)
	require.Equal(t, "ops@test", run.FiredBy)
	ds := s.log.fsm.RunDeliveries(key)
	require.Len(t, ds, 1)
	require.Equal(t, engine.StateSent, ds[0].State, "its deadline counts from the fire, not the slot")
	require.Len(t, s.sender.all(), before+1)
	requireEachSentOnce(t, s)
	require.Empty(t, alertsWith(s.log.fsm, "late-run:"), "a deliberate fire is not late")
	st := s.log.fsm.DayStats("2026-12-01")["hourly"]
	require.Equal(t, 0, st.Skipped)
	require.Equal(t, 1, st.Backfilled)
}

// gatedSender holds every batch until the test opens the gate, saying
// when each batch arrives.
type gatedSender struct {
	*simSender
	arrived chan struct{}
	gate    chan struct{}
}

func (g *gatedSender) Send(ctx context.Context, ch string, batch []heraldtype.Message) ([]heraldtype.Result, error) {
	g.arrived <- struct{}{}
	<-g.gate
	return g.simSender.Send(ctx, ch, batch)
}

// pauseMidSend plans five messages of rule r, sent a message a batch two
// batches at a time through snd (which says on arrived when a batch
// reaches the channel), has the executor claim them, and pauses r once
// two batches are with the channel. It returns the five.
func pauseMidSend(t *testing.T, s *sim, snd engine.Sender, arrived <-chan struct{}) []engine.NewDelivery {
	t.Helper()
	slot := s.clock.Now()
	s.cfg.BatchSize, s.cfg.SendConcurrency = 1, 2 // two batches in flight, the rest wait
	s.cfg.Sender = snd
	key := engine.RunKey("r", slot)
	s.apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: "r", Slot: slot, Now: slot})
	var nds []engine.NewDelivery
	for _, who := range []string{"a", "b", "c", "d", "e"} {
		nds = append(nds, engine.NewDelivery{ID: engine.DeliveryID(key, who), Recipient: who, Channel: "mock", Priority: heraldtype.PriorityNormal,
			NotBefore: slot, Deadline: slot.Add(time.Hour)})
	}
	s.apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: nds})
	s.lead("n1")

	s.exec.runOnce(s.ctx) // claims the five; the sends go on in the background
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("no batch reached the channel")
		}
	}
	s.apply(engine.CmdPauseRule, engine.PauseRule{Rule: "r", By: "op", Reason: "wrong text", Now: slot})
	return nds
}

// parkedUnattempted counts the deliveries of nds that are pending (handed
// back), checking that none spent an attempt.
func parkedUnattempted(t *testing.T, s *sim, nds []engine.NewDelivery) int {
	t.Helper()
	parked := 0
	for _, nd := range nds {
		d, _ := s.log.fsm.Delivery(nd.ID)
		if d.State == engine.StatePending {
			parked++
			require.Zero(t, d.Attempts, "no attempt spent")
		}
	}
	return parked
}

// TestPauseParksBatchesNotYetHandedToTheChannel: a pause that commits
// while a claimed group is being sent stops the batches still waiting for
// a send slot (handed back unsent, no attempt spent, parked until resume);
// only the batches already with the channel go.
func TestPauseParksBatchesNotYetHandedToTheChannel(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, slot)
	g := &gatedSender{simSender: s.sender, arrived: make(chan struct{}, 8), gate: make(chan struct{})}
	nds := pauseMidSend(t, s, g, g.arrived)
	close(g.gate)
	s.exec.wg.Wait()

	require.Len(t, s.sender.all(), 2, "only the batches already with the channel")
	require.Equal(t, 3, parkedUnattempted(t, s, nds), "handed back and held")
	require.Empty(t, s.log.fsm.Due(slot.Add(time.Minute), 10), "held: out of the due index")
}

// cancelWaitSender holds every batch until its call's context ends, saying
// when each batch arrives: a channel that never answers.
type cancelWaitSender struct {
	*simSender
	arrived chan struct{}
}

func (c *cancelWaitSender) Send(ctx context.Context, _ string, _ []heraldtype.Message) ([]heraldtype.Result, error) {
	c.arrived <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestPauseHandsBackBatchesThatFoundNoSendSlot: the batches of a paused
// rule still waiting for a send slot when their claim runs out are handed
// back and parked, as those that get a slot are. They were counted as stuck
// sends instead ("still in flight … they will be sent again"), and their
// claims were left to run out, once parkPaused ran only on taking a slot.
func TestPauseHandsBackBatchesThatFoundNoSendSlot(t *testing.T) {
	t.Parallel()
	s := newSim(t, time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC))
	s.cfg.ClaimTimeout = time.Second // the real time the sends get; the pause commits well within it
	snd := &cancelWaitSender{simSender: s.sender, arrived: make(chan struct{}, 8)}
	nds := pauseMidSend(t, s, snd, snd.arrived)
	s.exec.wg.Wait() // the claim runs out: the two with the channel are unanswered

	require.Equal(t, 3, parkedUnattempted(t, s, nds), "the batches that found no slot are handed back and held")
	stuck := alertsWith(s.log.fsm, "stuck:mock")
	require.Len(t, stuck, 1)
	require.Equal(t, 2, stuck[0].Params.Count, "only the batches with the channel are stuck")
}
