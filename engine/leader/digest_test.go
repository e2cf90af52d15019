package leader

import (
	"context"
	"encoding/json"
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

// submitFollowUps submits n tasks of rule for owner, due from at on, one
// per spacing.
func (s *sim) submitFollowUps(rule, owner string, n int, at time.Time, spacing time.Duration) {
	for i := range n {
		s.apply(engine.CmdSubmitTask, engine.SubmitTask{Key: fmt.Sprintf("%s-%s-%02d", rule, owner, i), Rule: rule,
			DueAt: at.Add(time.Duration(i) * spacing), Data: []byte(`{"owner":"` + owner + `"}`), Now: at.Add(-time.Hour)})
	}
}

// ownerOf plans a task's message to the owner named in its data.
func ownerOf(run engine.RunContext) []engine.Planned {
	var d struct{ Owner string }
	_ = json.Unmarshal(run.Data, &d)
	return []engine.Planned{{Recipient: d.Owner, Payload: json.RawMessage(`{"msgtype":"text","content":"follow up ` + run.Key + `"}`)}}
}

// followUpSim is a sim a minute before 09:00 in Shanghai with the digest
// rule follow_up (10-minute windows, planned by ownerOf).
func followUpSim(t *testing.T) (*sim, time.Time) {
	sh := mustZone(t, "Asia/Shanghai")
	nine := time.Date(2026, 12, 1, 9, 0, 0, 0, sh)
	s := newSim(t, nine.Add(-time.Minute), engine.Rule{Name: "follow_up", Timezone: "Asia/Shanghai", Channel: "mock",
		Deadline: time.Hour, Digest: 10 * time.Minute})
	s.rules.plan["follow_up"] = ownerOf
	return s, nine
}

func TestDigestThirtyAndOne(t *testing.T) {
	t.Parallel()
	s, nine := followUpSim(t)
	s.submitFollowUps("follow_up", "wangfang", 30, nine, 10*time.Second) // 09:00:00 … 09:04:50
	s.submitFollowUps("follow_up", "lina", 1, nine.Add(3*time.Minute), 0)
	s.lead("n1")
	s.advance(nine.Add(3*time.Minute+30*time.Second), time.Second)
	require.Empty(t, s.sender.all(), "nothing goes before the window ends")
	s.lead("n2") // a leader change during the window
	s.advance(nine.Add(20*time.Minute), time.Second)

	all := s.sender.all()
	require.Len(t, all, 2, "one message each")
	w := s.sender.sentTo("wangfang")
	require.Len(t, w, 1)
	require.True(t, nine.Add(10*time.Minute).Equal(w[0].at), "at the window's end: %s", w[0].at)
	var body struct {
		Digest string
		Items  []string
	}
	require.NoError(t, json.Unmarshal([]byte(w[0].payload), &body))
	require.Len(t, body.Items, 30)
	for i, k := range body.Items {
		require.Equal(t, engine.TaskRunKey(fmt.Sprintf("follow_up-wangfang-%02d", i)), k, "in the order of their times")
	}
	l := s.sender.sentTo("lina")
	require.Len(t, l, 1)
	require.Contains(t, l[0].payload, "follow up task:follow_up-lina-00", "one item: the plain message")

	// Each folded delivery records the digest it went out in, and is sent
	// with it; the digest went under its own id as idempotency key.
	dg, ok := s.log.fsm.Delivery(w[0].key)
	require.True(t, ok)
	require.Len(t, dg.Members, 30)
	require.Equal(t, engine.StateSent, dg.State)
	require.Equal(t, engine.DigestRunKey(dg.ID), dg.RunKey)
	for _, id := range dg.Members {
		m, _ := s.log.fsm.Delivery(id)
		require.Equal(t, dg.ID, m.Digest)
		require.Equal(t, engine.StateSent, m.State)
		require.Equal(t, "p-"+dg.ID, m.ProviderID)
	}
	require.Equal(t, 31, s.log.fsm.DayStats("2026-12-01")["follow_up"].Sent, "counted per reminder, not per message")
	require.Empty(t, s.log.fsm.Alerts())
}

// A leader that dies after the digest was claimed leaves it ambiguous:
// the next sends it again with the same key, once more as one message.
func TestDigestResentAfterLeaderChange(t *testing.T) {
	t.Parallel()
	nine := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, nine.Add(-time.Minute), engine.Rule{Name: "follow_up", Channel: "mock", Deadline: time.Hour, Digest: 10 * time.Minute})
	s.rules.plan["follow_up"] = ownerOf
	s.submitFollowUps("follow_up", "wangfang", 3, nine, time.Minute)
	s.lead("n1")
	s.advance(nine.Add(5*time.Minute), time.Second)
	s.clock.Set(nine.Add(10 * time.Minute))
	// n1 folds and claims at the window's end, then loses leadership
	// before the send's result is in.
	s.sched.runOnce(s.ctx)
	s.l.planner.wg.Wait()
	inbound := s.exec.digestInbound(s.clock.Now())
	due := s.log.fsm.Due(s.clock.Now(), 100)
	due, failed := s.exec.foldDigests(s.ctx, due, s.clock.Now(), inbound, false)
	require.False(t, failed)
	require.Len(t, due, 1)
	res := s.apply(engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{due[0].ID}, Leader: "n1", Now: s.clock.Now(), Timeout: 30 * time.Second})
	require.Len(t, res.(engine.ClaimResult).Claimed, 1)
	s.lead("n2")
	s.advance(nine.Add(20*time.Minute), time.Second)
	got := s.sender.sentTo("wangfang")
	require.Len(t, got, 1)
	require.Equal(t, due[0].ID, got[0].key)
	d, _ := s.log.fsm.Delivery(due[0].ID)
	require.Equal(t, engine.StateSent, d.State)
	require.Len(t, d.Members, 3)
}

// A digest that fails fails its members: one alert, each member's
// on_failed, and its retries on the digest.
func TestDigestFailsItsMembers(t *testing.T) {
	t.Parallel()
	nine := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, nine.Add(-time.Minute), engine.Rule{Name: "follow_up", Channel: "mock", Deadline: time.Hour,
		Digest: 10 * time.Minute, Retry: []time.Duration{time.Minute}})
	s.rules.plan["follow_up"] = ownerOf
	attempts := 0
	s.sender.failFunc = func(m heraldtype.Message) (heraldtype.Status, bool) {
		attempts++
		return heraldtype.StatusRetryable, true
	}
	s.submitFollowUps("follow_up", "wangfang", 4, nine, time.Minute)
	s.lead("n1")
	s.advance(nine.Add(30*time.Minute), time.Second)
	require.Equal(t, 2, attempts, "the digest was tried twice (one retry), not each member")
	failed := alertsWith(s.log.fsm, "failed:digest:")
	require.Len(t, failed, 1)
	require.Len(t, alertsWith(s.log.fsm, "failed:"), 1, "one alert for the digest, none per member")
	s.rules.mu.Lock()
	require.Len(t, s.rules.onFailed, 4, "on_failed per member")
	for _, f := range s.rules.onFailed {
		require.Contains(t, f.Error, "digest")
		require.Equal(t, 2, f.Attempts)
	}
	s.rules.mu.Unlock()
	require.Equal(t, 4, s.log.fsm.DayStats("2026-12-01")["follow_up"].Failed)
}

// A digest that cannot be built goes as plain messages, with an alert;
// digest.message returning nil means plain messages without one.
func TestDigestNotBuiltGoesPlain(t *testing.T) {
	t.Parallel()
	nine := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, nine.Add(-time.Minute),
		engine.Rule{Name: "broken", Channel: "mock", Deadline: time.Hour, Digest: 10 * time.Minute},
		engine.Rule{Name: "optout", Channel: "mock", Deadline: time.Hour, Digest: 10 * time.Minute})
	s.rules.plan["broken"] = ownerOf
	s.rules.plan["optout"] = ownerOf
	s.submitFollowUps("broken", "a", 3, nine, time.Minute)
	s.submitFollowUps("optout", "b", 2, nine, time.Minute)
	s.lead("n1")
	s.advance(nine.Add(20*time.Minute), time.Second)
	require.Len(t, s.sender.sentTo("a"), 3)
	require.Len(t, s.sender.sentTo("b"), 2)
	al := alertsWith(s.log.fsm, "digest-error:broken")
	require.Len(t, al, 1)
	require.Contains(t, al[0].Message, "attempt to index a nil value")
	require.Equal(t, engine.AlertDigestError, al[0].Kind, "a typed cause, worded by the dashboard in each language")
	require.Equal(t, "a", al[0].Params.Recipient)
	require.Equal(t, 3, al[0].Params.Count)
	require.Empty(t, alertsWith(s.log.fsm, "digest-error:optout"))
}

func TestFoldDigestApply(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, slot)
	add := func(run, who string) string {
		key := engine.TaskRunKey(run)
		s.apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: "r", Slot: slot, TaskKey: "", Now: slot})
		id := engine.DeliveryID(key, who)
		s.apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{{ID: id, Recipient: who, Channel: "mock",
			Priority: heraldtype.PriorityNormal, NotBefore: slot.Add(10 * time.Minute), Deadline: slot.Add(time.Hour)}}})
		return id
	}
	a, b, c, other := add("a", "ann"), add("b", "ann"), add("c", "ann"), add("d", "bob")
	fold := func(ids ...string) any {
		cmd, err := engine.Encode(engine.CmdFoldDigest, engine.FoldDigest{ID: engine.DigestID("r", "ann", ids), Members: ids, Payload: []byte(`{}`), Now: slot})
		require.NoError(t, err)
		res, err := s.log.Apply(s.ctx, cmd)
		require.NoError(t, err)
		return res
	}
	err, _ := fold(a).(error)
	require.ErrorContains(t, err, "two members or more")
	err, _ = fold(a, other).(error)
	require.ErrorContains(t, err, "not r to ann", "one person's digest only")
	bad := engine.FoldDigest{ID: "nope", Members: []string{a, b}, Payload: []byte(`{}`), Now: slot}
	err, _ = s.apply(engine.CmdFoldDigest, bad).(error)
	require.ErrorContains(t, err, "not the id")

	require.Nil(t, fold(b, a))
	require.Nil(t, fold(a, b), "the same members again: the same digest, nothing changes")
	err, _ = fold(a, c).(error)
	require.ErrorIs(t, err, engine.ErrDigestStale, "a is in a digest already")
	dg, ok := s.log.fsm.Delivery(engine.DigestID("r", "ann", []string{a, b}))
	require.True(t, ok)
	require.ElementsMatch(t, []string{a, b}, dg.Members)
	require.True(t, slices.IsSorted(dg.Members))
	due := s.log.fsm.Due(slot.Add(10*time.Minute), 10)
	ids := map[string]bool{}
	for _, d := range due {
		ids[d.ID] = true
	}
	require.Equal(t, map[string]bool{dg.ID: true, c: true, other: true}, ids, "the digest instead of its members")
	// A folded member cannot be claimed alone, nor expired alone.
	res := s.apply(engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{a}, Leader: "n1", Now: slot.Add(10 * time.Minute), Timeout: time.Minute})
	require.Empty(t, res.(engine.ClaimResult).Claimed)
	require.Equal(t, 0, s.apply(engine.CmdExpire, engine.Expire{IDs: []string{a}, Now: slot.Add(2 * time.Hour)}))
	// Expiring the digest expires its members.
	require.Equal(t, 1, s.apply(engine.CmdExpire, engine.Expire{IDs: []string{dg.ID}, Now: slot.Add(2 * time.Hour)}))
	for _, id := range []string{a, b} {
		m, _ := s.log.fsm.Delivery(id)
		require.Equal(t, engine.StateExpired, m.State)
		require.True(t, strings.HasPrefix(m.LastError, "digest "+dg.ID+" expired"), m.LastError)
	}
}

// A task whose reminder is folded into a digest cannot be cancelled: its
// message is part of another.
func TestCancelFoldedTaskRefused(t *testing.T) {
	t.Parallel()
	nine := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, nine.Add(-time.Minute), engine.Rule{Name: "follow_up", Channel: "mock", Deadline: time.Hour, Digest: 10 * time.Minute})
	s.rules.plan["follow_up"] = ownerOf
	s.submitFollowUps("follow_up", "wangfang", 2, nine, time.Minute)
	s.lead("n1")
	s.advance(nine.Add(5*time.Minute), time.Second)
	// Before the window ends it can still be cancelled.
	res := s.apply(engine.CmdCancelTask, engine.CancelTask{Key: "follow_up-wangfang-01", Now: nine.Add(5 * time.Minute)})
	require.Equal(t, engine.TaskCancelled, res.(engine.CancelResult).Task.State)
	s.submitFollowUps("follow_up", "lina", 2, nine, time.Minute)
	s.advance(nine.Add(10*time.Minute), time.Second)
	err, _ := s.apply(engine.CmdCancelTask, engine.CancelTask{Key: "follow_up-lina-00", Now: nine.Add(10 * time.Minute)}).(error)
	require.ErrorIs(t, err, engine.ErrTaskFired)
	require.Len(t, s.sender.sentTo("wangfang"), 1, "the one left goes plain")
	require.Len(t, s.sender.sentTo("lina"), 1, "one digest")
}

// During a rolling upgrade (a member applies FSM version 1, which has no
// FoldDigest), a digest rule's messages go one by one instead of waiting.
func TestDigestWaitsForNoOldMember(t *testing.T) {
	t.Parallel()
	nine := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, nine.Add(-time.Minute), engine.Rule{Name: "follow_up", Channel: "mock", Deadline: time.Hour, Digest: 10 * time.Minute})
	s.rules.plan["follow_up"] = ownerOf
	s.apply(engine.CmdUpsertMember, engine.Member{ID: "old", RaftAddr: "a", HTTPAddr: "b"}) // no FSM version: 1
	s.cfg.Replicator = admittingLog{s.log}
	s.submitFollowUps("follow_up", "wangfang", 3, nine, time.Minute)
	s.lead("n1")
	s.advance(nine.Add(20*time.Minute), time.Second)
	require.Len(t, s.sender.sentTo("wangfang"), 3)
}

// admittingLog checks every command against the members' FSM versions
// first, as the cluster's leader does.
type admittingLog struct{ *localLog }

func (r admittingLog) Apply(ctx context.Context, cmd []byte) (any, error) {
	cmd, err := r.fsm.Admit(cmd)
	if err != nil {
		return nil, err
	}
	return r.localLog.Apply(ctx, cmd)
}

// A failed digest's deliveries retried by hand go alone; the digest
// itself is not retried (its members were counted one by one).
func TestRetryFoldedByHand(t *testing.T) {
	t.Parallel()
	nine := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, nine.Add(-time.Minute), engine.Rule{Name: "follow_up", Channel: "mock", Deadline: time.Hour,
		Digest: 10 * time.Minute, Retry: []time.Duration{}})
	s.rules.plan["follow_up"] = ownerOf
	fail := true
	s.sender.failFunc = func(heraldtype.Message) (heraldtype.Status, bool) { return heraldtype.StatusPermanent, fail }
	s.submitFollowUps("follow_up", "wangfang", 2, nine, time.Minute)
	s.lead("n1")
	s.advance(nine.Add(15*time.Minute), time.Second)
	digests := s.log.fsm.Deliveries(func(d *engine.Delivery) bool { return len(d.Members) > 0 })
	require.Len(t, digests, 1)
	dg := digests[0]
	require.Equal(t, engine.StateFailed, dg.State)
	fail = false
	res := s.apply(engine.CmdRetryDeliveries, engine.RetryDeliveries{IDs: append([]string{dg.ID}, dg.Members...), By: "ops", Now: nine.Add(15 * time.Minute), Deadline: nine.Add(2 * time.Hour)}).(engine.RetryResult)
	require.ElementsMatch(t, dg.Members, res.Retried)
	require.Len(t, res.Skipped, 1)
	require.Contains(t, res.Skipped[0].Reason, "a digest")
	s.advance(nine.Add(20*time.Minute), time.Second)
	require.Len(t, s.sender.sentTo("wangfang"), 2, "each alone")
	require.Equal(t, 2, s.log.fsm.DayStats("2026-12-01")["follow_up"].Sent)
	require.Equal(t, 0, s.log.fsm.DayStats("2026-12-01")["follow_up"].Failed)
}

// TestDigestOfManyPeopleIsOneMessageEach: at a window's end the members of
// many people's digests are due at once, more than a pass takes from the
// due index (a few claim groups' worth). Each person still gets one
// digest, not their members cut apart and sent as plain messages.
func TestDigestOfManyPeopleIsOneMessageEach(t *testing.T) {
	t.Parallel()
	s, nine := followUpSim(t)
	s.cfg.ClaimBatch = 10               // a pass then looks at 20 due deliveries: far fewer than the members
	const people = maxFoldsPerPass + 36 // and more digests than a pass folds
	for i := range people {
		s.submitFollowUps("follow_up", fmt.Sprintf("p%02d", i), 3, nine, time.Minute)
	}
	s.lead("n1")
	s.advance(nine.Add(20*time.Minute), time.Second)

	all := s.sender.all()
	per := map[string]int{}
	for _, m := range all {
		per[m.to]++
	}
	for i := range people {
		who := fmt.Sprintf("p%02d", i)
		require.Equal(t, 1, per[who], "%s: one digest, got %d messages", who, per[who])
	}
	require.Len(t, all, people)
}

// typeLog records the type of every command proposed, in order.
type typeLog struct {
	*localLog
	mu    sync.Mutex
	types []engine.CommandType
	ids   [][]string // a Claim's ids, beside its type
}

func (r *typeLog) Apply(ctx context.Context, cmd []byte) (any, error) {
	t := engine.CommandType(cmd[0])
	var ids []string
	if t == engine.CmdClaimPacked {
		c, err := engine.UnpackClaim(cmd[2:])
		if err != nil {
			return nil, err
		}
		ids = c.IDs
	}
	r.mu.Lock()
	r.types, r.ids = append(r.types, t), append(r.ids, ids)
	r.mu.Unlock()
	return r.localLog.Apply(ctx, cmd)
}

// TestDigestFoldsLetOtherWorkThrough: at a window's end with many people's
// digests to fold (each a rule call and a proposal), another rule's
// message due at the same instant is claimed after a bounded number of
// folds, not after all of them: a pass folds at most maxFoldsPerPass.
func TestDigestFoldsLetOtherWorkThrough(t *testing.T) {
	t.Parallel()
	nine := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := newSim(t, nine.Add(-time.Minute),
		engine.Rule{Name: "follow_up", Channel: "mock", Deadline: time.Hour, Digest: 10 * time.Minute},
		engine.Rule{Name: "daily", Schedule: "10 9 * * *", Channel: "mock"})
	tl := &typeLog{localLog: s.log}
	s.cfg.Replicator = tl
	s.rules.plan["follow_up"] = ownerOf
	s.rules.plan["daily"] = to("boss")
	const people = 3 * maxFoldsPerPass
	for i := range people {
		s.submitFollowUps("follow_up", fmt.Sprintf("p%03d", i), 2, nine, time.Minute)
	}
	s.lead("n1")
	s.advance(nine.Add(20*time.Minute), time.Second)

	boss := engine.DeliveryID(engine.RunKey("daily", nine.Add(10*time.Minute)), "boss")
	folds, foldsBefore := 0, -1
	for i, typ := range tl.types {
		if typ == engine.CmdFoldDigest {
			folds++
		}
		if typ == engine.CmdClaimPacked && slices.Contains(tl.ids[i], boss) {
			foldsBefore = folds
		}
	}
	require.Equal(t, people, folds, "one digest each")
	require.GreaterOrEqual(t, foldsBefore, 0, "the daily message was claimed")
	require.LessOrEqual(t, foldsBefore, maxFoldsPerPass, "claimed after %d folds", foldsBefore)
	require.Len(t, s.sender.all(), people+1)
}

// TestPlainMarksAreForgotten: the deliveries of a digest rule that go one
// by one (its digest.message returned nil) are remembered so a later pass
// does not fold them; once they were attempted or ended, never again. A
// leader must not keep them all for as long as it leads.
func TestPlainMarksAreForgotten(t *testing.T) {
	t.Parallel()
	nine := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := newSim(t, nine.Add(-time.Minute), engine.Rule{Name: "optout", Channel: "mock", Deadline: time.Hour, Digest: 10 * time.Minute})
	s.rules.plan["optout"] = ownerOf
	const people, windows = 500, 4
	for w := range windows {
		for i := range people {
			s.submitFollowUps("optout", fmt.Sprintf("w%dp%03d", w, i), 2, nine.Add(time.Duration(w)*10*time.Minute), time.Minute)
		}
	}
	s.lead("n1")
	s.advance(nine.Add(time.Duration(windows+1)*10*time.Minute), time.Second)
	require.Len(t, s.sender.all(), people*windows*2, "one by one")
	require.LessOrEqual(t, len(s.exec.plain), 2*people*2, "marks of what was sent are forgotten (at most two windows' worth)")
}

// Digest builds, for the sim's rules, a message listing the folded run
// keys in order; rule "broken" fails and rule "optout" returns nil.
func (r *simRules) Digest(_ context.Context, rule, recipient string, items []engine.DigestItem) (json.RawMessage, error) {
	switch rule {
	case "broken":
		return nil, errors.New("digest.message: attempt to index a nil value")
	case "optout":
		return nil, nil
	}
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = it.RunKey
	}
	b, err := json.Marshal(map[string]any{"digest": recipient, "items": keys})
	return b, err
}
