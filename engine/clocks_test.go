package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
)

const month = 30 * 24 * time.Hour

// threeMembers records n1, n2 and n3, all on this build.
func (b *fsmBundle) threeMembers() {
	for _, id := range []string{"n1", "n2", "n3"} {
		require.Nil(b.t, b.apply(CmdUpsertMember, Member{ID: id, FSMVersion: FSMVersion}))
	}
}

// sentAt settles the one delivery of a run planned for alice as sent at.
func (b *fsmBundle) sentAt(key string, at time.Time) string {
	id := DeliveryID(key, "alice")
	c := b.claim("n1", at, id)
	require.Len(b.t, c, 1)
	require.Equal(b.t, 1, b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: at,
		Results: []Settlement{{ID: id, Seq: c[0].Seq, Status: heraldtype.StatusSent}}}))
	return id
}

func observe(now time.Time, clocks map[string]time.Time) ObserveClocks {
	return ObserveClocks{Now: now, Clocks: clocks, MaxSkew: 30 * time.Second, Within: 2 * time.Minute}
}

// A leader whose clock ran 30 days ahead, once the log has seen the
// members' clocks, cannot prune the history nor empty the ledger nor
// expire a pending delivery: Apply refuses, saying why, and changes
// nothing.
func TestPruneAndExpireAheadOfTheObservedClocksAreRefused(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.threeMembers()
	done := b.sentAt(b.planned("done", "alice"), t0)
	pending := DeliveryID(b.planned("later", "alice"), "alice")
	now := t0.Add(time.Hour)
	ahead := now.Add(month)
	require.Nil(t, b.apply(CmdObserveClocks, observe(ahead, map[string]time.Time{"n1": ahead, "n2": now, "n3": now.Add(time.Second)})))
	seen, ok := b.fsm.ClockSeen()
	require.True(t, ok)
	require.Equal(t, now.Add(time.Second), seen.Median, "the majority's time, not the leader's")

	res := b.apply(CmdPrune, Prune{Before: ahead.Add(-RetentionDefault), LedgerBefore: ahead.Add(-LedgerRetentionDefault), Now: ahead})
	err, _ := res.(error)
	require.ErrorIs(t, err, ErrHorizonAhead)
	require.ErrorContains(t, err, "Prune refused: its time 2026-12-31T02:00:00Z runs 719h59m59s ahead of the cluster's clock as the log last saw it")
	_, ok = b.fsm.Delivery(done)
	require.True(t, ok, "nothing pruned")

	err, _ = b.apply(CmdExpire, Expire{IDs: []string{pending}, Now: ahead}).(error)
	require.ErrorIs(t, err, ErrHorizonAhead)
	require.Equal(t, StatePending, b.state(pending).State, "nothing expired")

	err, _ = b.apply(CmdPruneAudit, PruneAudit{Before: ahead, Now: ahead}).(error)
	require.ErrorIs(t, err, ErrHorizonAhead)

	// A leader whose clock agrees prunes and expires as ever, within the
	// observation's allowed age.
	later := now.Add(2 * time.Minute)
	require.Equal(t, 1, b.apply(CmdPrune, Prune{Before: later.Add(-30 * time.Minute), LedgerBefore: later.Add(-time.Hour), Now: later}).(PruneResult).Deliveries)
	past := t0.Add(2*time.Hour + time.Minute)
	require.Nil(t, b.apply(CmdObserveClocks, observe(past, map[string]time.Time{"n1": past, "n2": past, "n3": past})))
	require.Equal(t, 1, b.apply(CmdExpire, Expire{IDs: []string{pending}, Now: past}))
	require.Equal(t, StateExpired, b.state(pending).State)

	// An observation too old for the time a command carries is no
	// evidence: refused until the leader observes again.
	stale := past.Add(3 * time.Minute)
	err, _ = b.apply(CmdPrune, Prune{Before: stale.Add(-time.Hour), LedgerBefore: stale.Add(-time.Hour), Now: stale}).(error)
	require.ErrorIs(t, err, ErrHorizonAhead)
}

// A leader cannot vouch for its own clock: an observation needs the
// clocks of a majority of the members.
func TestObserveClocksNeedsAMajority(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.threeMembers()
	ahead := t0.Add(month)
	err, _ := b.apply(CmdObserveClocks, observe(ahead, map[string]time.Time{"n1": ahead})).(error)
	require.EqualError(t, err, "observe clocks: clocks of 1 of the 3 members, not a majority")
	err, _ = b.apply(CmdObserveClocks, observe(ahead, map[string]time.Time{"n1": ahead, "gone": ahead})).(error)
	require.Error(t, err, "a clock of no member does not count")
	_, ok := b.fsm.ClockSeen()
	require.False(t, ok)

	// Two clocks that disagree: the median is between them, so neither's
	// horizon is taken.
	require.Nil(t, b.apply(CmdObserveClocks, observe(ahead, map[string]time.Time{"n1": ahead, "n2": t0})))
	err, _ = b.apply(CmdPrune, Prune{Before: ahead.Add(-RetentionDefault), LedgerBefore: ahead.Add(-LedgerRetentionDefault), Now: ahead}).(error)
	require.ErrorIs(t, err, ErrHorizonAhead)
}

// A log from before FSM version 3 has no observation: a Prune or Expire
// of any time applies as it always did, so old logs replay to the same
// state (cluster's TestGolden replays a recorded one).
func TestWithoutObservationsHorizonsApplyAsBefore(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.threeMembers()
	done := b.sentAt(b.planned("done", "alice"), t0)
	pending := DeliveryID(b.planned("later", "alice"), "alice")
	ahead := t0.Add(month)
	require.Equal(t, 1, b.apply(CmdExpire, Expire{IDs: []string{pending}, Now: ahead}))
	res := b.apply(CmdPrune, Prune{Before: ahead.Add(-RetentionDefault), LedgerBefore: ahead.Add(-LedgerRetentionDefault), Now: ahead}).(PruneResult)
	require.Equal(t, 1, res.Deliveries)
	require.Equal(t, StateExpired, b.state(pending).State)
	_, ok := b.fsm.Delivery(done)
	require.False(t, ok)
}

// The observation is part of the state: a snapshot carries it (and then
// says it needs FSM version 3), a restored node refuses the same horizon.
func TestSnapshotCarriesTheClockObservation(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.threeMembers()
	ahead := t0.Add(month)
	require.Nil(t, b.apply(CmdObserveClocks, observe(t0, map[string]time.Time{"n1": t0, "n2": t0, "n3": t0.Add(month)})))
	want, _ := b.fsm.ClockSeen()

	snap, err := b.fsm.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, snap.Persist(&buf))
	line, err := bufio.NewReader(bytes.NewReader(buf.Bytes())).ReadString('\n')
	require.NoError(t, err)
	var h snapshotHeader
	require.NoError(t, json.Unmarshal([]byte(line), &h))
	require.Equal(t, uint16(3), h.FSMVersion)

	out := NewFSM()
	require.NoError(t, out.Restore(bytes.NewReader(buf.Bytes())))
	got, ok := out.ClockSeen()
	require.True(t, ok)
	require.Equal(t, want.Median, got.Median)
	require.Equal(t, want.Clocks, got.Clocks)
	cmd, err := Encode(CmdPrune, Prune{Before: ahead, LedgerBefore: ahead, Now: ahead})
	require.NoError(t, err)
	err, _ = out.Apply(b.index+1, 1, cmd).(error)
	require.ErrorIs(t, err, ErrHorizonAhead)

	// The same bytes every time.
	snap2, _ := out.Snapshot()
	var again bytes.Buffer
	require.NoError(t, snap2.Persist(&again))
	require.True(t, strings.HasSuffix(again.String(), buf.String()[len(line):]))
}

// ObserveClocks is new in FSM version 3: while a member runs a build of
// version 2 the leader does not propose it (a member would stop on it),
// and so the guard stays unarmed.
func TestAdmitHoldsObserveClocksForOlderMembers(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.apply(CmdUpsertMember, Member{ID: "n1", FSMVersion: FSMVersion})
	b.apply(CmdUpsertMember, Member{ID: "n2", FSMVersion: 2})
	cmd, err := Encode(CmdObserveClocks, observe(t0, map[string]time.Time{"n1": t0, "n2": t0}))
	require.NoError(t, err)
	_, err = b.fsm.Admit(cmd)
	require.ErrorIs(t, err, ErrMembersBehind)
	require.EqualError(t, err, "ObserveClocks needs FSM version 3 on every member; waiting for n2 (FSM version 2) to be upgraded")
	b.apply(CmdUpsertMember, Member{ID: "n2", FSMVersion: FSMVersion})
	_, err = b.fsm.Admit(cmd)
	require.NoError(t, err)
}

// The last command stamped by the leader is kept for the follower's
// check of the leader's clock (outside Apply).
func TestLastStampIsTheLeadersTime(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	_, ok := b.fsm.LastStamp()
	require.False(t, ok)
	b.planned("r", "alice")
	st, ok := b.fsm.LastStamp()
	require.True(t, ok)
	require.Equal(t, Stamp{Index: 1, At: t0}, st, "StartRun stamps; AddDeliveries and FinishPlan do not")
	b.claim("n1", t0.Add(time.Minute), DeliveryID(RunKey("r", t0), "alice"))
	st, _ = b.fsm.LastStamp()
	require.Equal(t, t0.Add(time.Minute), st.At)
}
