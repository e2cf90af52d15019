package leader

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// simClocks are the wall clocks of a three-node sim: each node's skew from
// the true time (the sim's clock, which the sender records), the view each
// node has of the others' (as the cluster's member reports give it), and
// the leadership transfers asked for.
type simClocks struct {
	mu        sync.Mutex
	true      *enginetest.Clock
	skew      map[string]time.Duration
	transfers []string
	refuse    error // what Transfer answers; nil: it succeeds
}

func newSimClocks(c *enginetest.Clock, nodes ...string) *simClocks {
	s := &simClocks{true: c, skew: map[string]time.Duration{}}
	for _, n := range nodes {
		s.skew[n] = 0
	}
	return s
}

func (c *simClocks) set(node string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.skew[node] = d
}

func (c *simClocks) now(node string) func() time.Time {
	return func() time.Time {
		c.mu.Lock()
		d := c.skew[node]
		c.mu.Unlock()
		return c.true.Now().Add(d)
	}
}

func (c *simClocks) asked() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.transfers)
}

// simClockView is node's view of the others' clocks.
type simClockView struct {
	c    *simClocks
	self string
}

func (v simClockView) MemberClocks() ([]MemberClock, int) {
	v.c.mu.Lock()
	defer v.c.mu.Unlock()
	var out []MemberClock
	for _, id := range slices.Sorted(maps.Keys(v.c.skew)) {
		out = append(out, MemberClock{ID: id, Offset: v.c.skew[id] - v.c.skew[v.self]})
	}
	return out, len(v.c.skew)
}

// clockSim is a sim of three members whose leader's clock a test moves,
// with a rule that sends alice a message every minute.
func clockSim(t *testing.T) (*sim, *simClocks) {
	s := newSim(t, t0, engine.Rule{Name: "tick", Schedule: "* * * * *", Timezone: "UTC", Channel: "mock", Deadline: time.Hour})
	s.rules.plan["tick"] = to("alice")
	s.cfg.Retention, s.cfg.LedgerRetention = engine.RetentionDefault, engine.LedgerRetentionDefault
	clocks := newSimClocks(s.clock, "n1", "n2", "n3")
	s.nodeCfg = func(node string, cfg *Config) {
		cfg.NowFunc = clocks.now(node)
		cfg.Clocks = simClockView{c: clocks, self: node}
		cfg.ClockCheckEvery = 5 * time.Second
		cfg.Transfer = func(_ context.Context, id string) error {
			clocks.mu.Lock()
			defer clocks.mu.Unlock()
			clocks.transfers = append(clocks.transfers, id)
			return clocks.refuse
		}
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		s.apply(engine.CmdUpsertMember, engine.Member{ID: id, FSMVersion: engine.FSMVersion})
	}
	return s, clocks
}

// history puts into the log what a skewed leader would destroy: a
// delivery sent two days ago (retention keeps it five days more), and one
// planned ahead, due at due with an hour's deadline.
func (s *sim) history(due time.Time) (old, ahead string) {
	s.t.Helper()
	past := t0.Add(-48 * time.Hour)
	_, old = s.oneDelivery(past)
	c := s.apply(engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{old}, Leader: "n0", Now: past, Timeout: time.Minute}).(engine.ClaimResult)
	require.Len(s.t, c.Claimed, 1)
	s.apply(engine.CmdRecordResults, engine.RecordResults{Leader: "n0", Now: past,
		Results: []engine.Settlement{{ID: old, Seq: c.Claimed[0].Seq, Status: heraldtype.StatusSent}}})
	key := engine.TaskRunKey("ahead")
	ahead = engine.DeliveryID(key, "bob")
	s.apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: "r", Slot: due, TaskKey: "ahead", Now: t0})
	s.apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{
		{ID: ahead, Recipient: "bob", Channel: "mock", Priority: heraldtype.PriorityNormal, NotBefore: due, Deadline: due.Add(time.Hour)}}})
	s.apply(engine.CmdFinishPlan, engine.FinishPlan{RunKey: key, Now: t0})
	return old, ahead
}

// checkSlots requires that every minute's slot from first to last was
// sent to alice exactly once, none before its slot, none skipped, and
// returns how many were sent later than late after their slot.
func checkSlots(t *testing.T, s *sim, first, last time.Time, late time.Duration) int {
	t.Helper()
	sends := map[string][]sent{}
	for _, x := range s.sender.sentTo("alice") {
		sends[x.key] = append(sends[x.key], x)
	}
	n := 0
	for slot := first; !slot.After(last); slot = slot.Add(time.Minute) {
		id := engine.DeliveryID(engine.RunKey("tick", slot), "alice")
		got := sends[id]
		require.Len(t, got, 1, "slot %s sent once", slot.Format(time.TimeOnly))
		require.False(t, got[0].at.Before(slot), "slot %s sent at %s, before its time", slot.Format(time.TimeOnly), got[0].at.Format(time.TimeOnly))
		if got[0].at.Sub(slot) > late {
			n++
		}
	}
	for _, r := range s.runs("tick") {
		require.NotEqual(t, engine.RunSkipped, r.State, "slot %s skipped", r.Slot)
		require.False(t, r.Slot.After(last.Add(time.Minute)), "slot %s fired ahead of its time", r.Slot)
	}
	return n
}

func clockAlert(t *testing.T, f *engine.FSM) *engine.Alert {
	t.Helper()
	al, ok := f.Alert(engine.AlertID(engine.AlertCause{Kind: engine.AlertClockSkew}.Key()))
	require.True(t, ok, "a clock-skew alert")
	return al
}

// The case: the leader's clock jumps 30 days ahead for 10 minutes
// (and no member can take over: the transfer is refused). It fires no
// slot, prunes nothing and expires nothing; it says so in an alert naming
// itself and its offset; and the log refuses a prune at its time. Once its
// clock is back, every slot is sent once, late but none skipped.
func TestLeaderClockThirtyDaysAhead(t *testing.T) {
	t.Parallel()
	s, clocks := clockSim(t)
	clocks.refuse = errors.New("no member could take over")
	jump := t0.Add(10 * time.Minute)
	old, ahead := s.history(jump.Add(15 * time.Minute))
	s.lead("n1")
	s.advance(jump, time.Second)
	firstSlot := t0.Add(time.Minute)
	require.Zero(t, checkSlots(t, s, firstSlot, jump, 5*time.Second), "before the jump every slot goes on time")
	runsBefore := len(s.runs("tick"))
	deliveriesBefore := len(s.log.fsm.Deliveries(nil))

	clocks.set("n1", 30*24*time.Hour)
	back := jump.Add(10 * time.Minute)
	s.advance(back, time.Second)

	require.Len(t, s.runs("tick"), runsBefore, "no slot fired while the clock was off")
	require.Len(t, s.log.fsm.Deliveries(nil), deliveriesBefore, "nothing pruned")
	_, ok := s.log.fsm.Delivery(old)
	require.True(t, ok, "the delivery sent two days ago is kept")
	d, _ := s.log.fsm.Delivery(ahead)
	require.Equal(t, engine.StatePending, d.State, "the delivery due later is neither sent early nor expired")
	al := clockAlert(t, s.log.fsm)
	require.Equal(t, []string{"n1"}, al.Params.Nodes)
	require.Contains(t, al.Message, "the clocks of n1 differ from the majority's by more than max_clock_skew 10s: n1 +720h0m0s (ahead); the leader n1 fires no slot and prunes and expires nothing until its clock agrees and hands leadership to n2")
	require.Equal(t, "critical", engine.AlertDataOf(al, time.UTC).Severity)
	require.False(t, al.Last.After(back), "the alert is stamped by the majority's time, not n1's")
	require.Contains(t, clocks.asked(), "n2", "it asked to hand leadership to a member whose clock agrees")
	// Were the leader's own gates gone, the log itself refuses its horizon.
	skewed := clocks.now("n1")()
	res := s.apply(engine.CmdPrune, engine.Prune{Before: skewed.Add(-engine.RetentionDefault), LedgerBefore: skewed.Add(-engine.LedgerRetentionDefault), Now: skewed})
	err, _ := res.(error)
	require.ErrorIs(t, err, engine.ErrHorizonAhead)
	t.Logf("while n1's clock was 30 days ahead: runs %d → %d, deliveries %d → %d, alert %q; prune at its time: %v",
		runsBefore, len(s.runs("tick")), deliveriesBefore, len(s.log.fsm.Deliveries(nil)), al.Message, err)

	clocks.set("n1", 0)
	end := back.Add(20 * time.Minute)
	s.advance(end, time.Second)
	late := checkSlots(t, s, firstSlot, end, 5*time.Second)
	require.Equal(t, 9, late, "the slots of the jump go when the clock is back, late (the one of that instant on time)")
	d, _ = s.log.fsm.Delivery(ahead)
	require.Equal(t, engine.StateSent, d.State)
	_, ok = s.log.fsm.Delivery(old)
	require.True(t, ok, "still within retention")
	al = clockAlert(t, s.log.fsm)
	require.True(t, al.Acked)
	require.True(t, strings.HasPrefix(al.Message, "resolved: "), al.Message)
	slots := int(end.Sub(firstSlot)/time.Minute) + 1
	require.Len(t, s.log.fsm.Deliveries(nil), slots+2, "every delivery still there: none pruned")
	t.Logf("after the clock came back: %d slots sent once each (%d of them late), %d sends in all, %d deliveries (pruned 0), alert %q",
		slots, late, len(s.sender.all()), len(s.log.fsm.Deliveries(nil)), al.Message)
}

// A member whose clock agrees takes over: the slots of the skew go on
// time from it; the alert names the old leader until its clock is back.
func TestSkewedLeaderHandsLeadershipOver(t *testing.T) {
	t.Parallel()
	s, clocks := clockSim(t)
	jump := t0.Add(5 * time.Minute)
	s.lead("n1")
	s.advance(jump, time.Second)
	clocks.set("n1", 30*24*time.Hour)
	s.advance(jump.Add(10*time.Second), time.Second)
	require.Equal(t, "n2", clocks.asked()[0])
	s.lead("n2") // as raft's transfer makes it
	back := jump.Add(10 * time.Minute)
	s.advance(back, time.Second)
	require.Zero(t, checkSlots(t, s, t0.Add(time.Minute), back, 5*time.Second), "every slot on time")
	al := clockAlert(t, s.log.fsm)
	require.Equal(t, []string{"n1"}, al.Params.Nodes)
	require.False(t, al.Acked)
	require.NotContains(t, al.Message, "the leader n1", "n2 leads; it names n1 as the member whose clock is off")

	clocks.set("n1", 0)
	s.advance(back.Add(time.Minute), time.Second)
	require.True(t, clockAlert(t, s.log.fsm).Acked, "resolved")
}

// A new leader that does not yet know a majority's clocks fires nothing
// until it does; one member's clock off alone (the leader agreeing with
// the other) holds nothing but is alerted.
func TestClockVerdicts(t *testing.T) {
	t.Parallel()
	s, clocks := clockSim(t)
	s.lead("n1")
	for _, tc := range []struct {
		name      string
		skew      map[string]time.Duration
		known     []string
		suspended string
		off       []string
	}{
		{name: "all agree", known: []string{"n1", "n2", "n3"}},
		{name: "a follower off", skew: map[string]time.Duration{"n3": -time.Hour}, known: []string{"n1", "n2", "n3"}, off: []string{"n3"}},
		{name: "the leader off", skew: map[string]time.Duration{"n1": time.Minute}, known: []string{"n1", "n2", "n3"},
			suspended: "this node's clock is +1m0s (ahead) from the majority's (max clock skew 10s)", off: []string{"n1"}},
		{name: "two clocks that disagree", skew: map[string]time.Duration{"n2": time.Hour}, known: []string{"n1", "n2"},
			suspended: "this node's clock is -30m0s (behind) from the majority's (max clock skew 10s)", off: []string{"n1", "n2"}},
		{name: "only its own", known: []string{"n1"}, suspended: "the clocks of 1 of the 3 members are known, not a majority's"},
	} {
		clocks.mu.Lock()
		clocks.skew = map[string]time.Duration{}
		for _, id := range tc.known {
			clocks.skew[id] = tc.skew[id]
		}
		clocks.mu.Unlock()
		view := simClockView{c: clocks, self: "n1"}
		s.cfg.Clocks = view
		s.l.cfg.Clocks = fixedMembers{view, 3}
		v := s.l.clock.judge()
		require.Equal(t, tc.suspended != "", v.suspended, tc.name)
		require.Equal(t, tc.suspended, v.why, tc.name)
		var off []string
		for _, c := range v.off {
			off = append(off, c.ID)
		}
		require.Equal(t, tc.off, off, tc.name)
	}
}

// fixedMembers says the cluster has n members whatever the view knows.
type fixedMembers struct {
	ClockView
	n int
}

func (f fixedMembers) MemberClocks() ([]MemberClock, int) {
	c, _ := f.ClockView.MemberClocks()
	return c, f.n
}

// While the leader is suspended (here: the clocks of a majority not known yet),
// a prune that is due and a delivery past its deadline wait; once it
// lifts, both happen as ever.
func TestSuspendedLeaderPrunesAndExpiresNothing(t *testing.T) {
	t.Parallel()
	s := newSim(t, t0)
	s.cfg.Retention, s.cfg.LedgerRetention = engine.RetentionDefault, engine.LedgerRetentionDefault
	past := t0.Add(-8 * 24 * time.Hour)
	_, old := s.oneDelivery(past)
	c := s.apply(engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{old}, Leader: "n0", Now: past, Timeout: time.Minute}).(engine.ClaimResult)
	s.apply(engine.CmdRecordResults, engine.RecordResults{Leader: "n0", Now: past,
		Results: []engine.Settlement{{ID: old, Seq: c.Claimed[0].Seq, Status: heraldtype.StatusSent}}})
	_, late := s.oneDelivery(t0.Add(-2 * time.Hour)) // its deadline passed an hour ago
	s.lead("n1")
	s.l.clock.verdict.Store(&clockVerdict{suspended: true, why: "the clocks of 1 of the 3 members are known, not a majority's"})
	s.advance(t0.Add(10*time.Minute), time.Second)
	_, ok := s.log.fsm.Delivery(old)
	require.True(t, ok, "not pruned while held")
	d, _ := s.log.fsm.Delivery(late)
	require.Equal(t, engine.StatePending, d.State, "not expired while held")

	s.l.clock.verdict.Store(&clockVerdict{})
	s.advance(t0.Add(20*time.Minute), time.Second)
	d, _ = s.log.fsm.Delivery(late)
	require.Equal(t, engine.StateExpired, d.State)
	_, ok = s.log.fsm.Delivery(old)
	require.False(t, ok, "pruned once the clock is trusted")
}
