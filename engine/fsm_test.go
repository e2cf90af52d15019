package engine

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/heraldhq/herald/engine/heraldtype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)

// fsmBundle applies commands to an FSM as the log would, at a given term.
type fsmBundle struct {
	t     *testing.T
	fsm   *FSM
	index uint64
	term  uint64
	// packed writes the commands that have a packed twin packed, as a
	// leader does once every member reads them.
	packed bool
}

func setupFSM(t *testing.T) *fsmBundle {
	return &fsmBundle{t: t, fsm: NewFSM(), term: 1}
}

func (b *fsmBundle) apply(ct CommandType, body any) any {
	b.t.Helper()
	oldest := uint16(1)
	if b.packed {
		oldest = FSMVersion
	}
	cmd, err := EncodeFor(ct, body, oldest)
	require.NoError(b.t, err)
	b.index++
	return b.fsm.Apply(b.index, b.term, cmd)
}

// planned starts a run at t0 with the given recipients, all due at t0.
func (b *fsmBundle) planned(rule string, recipients ...string) string {
	key := RunKey(rule, t0)
	require.Nil(b.t, b.apply(CmdStartRun, StartRun{Key: key, Rule: rule, Slot: t0, Now: t0}))
	var nds []NewDelivery
	for _, r := range recipients {
		nds = append(nds, NewDelivery{ID: DeliveryID(key, r), Recipient: r, Channel: "mock",
			Payload: json.RawMessage(`{"msgtype":"text","content":"hi"}`), Priority: heraldtype.PriorityNormal,
			NotBefore: t0, Deadline: t0.Add(2 * time.Hour)})
	}
	require.Equal(b.t, len(recipients), b.apply(CmdAddDeliveries, AddDeliveries{RunKey: key, Deliveries: nds}))
	require.Nil(b.t, b.apply(CmdFinishPlan, FinishPlan{RunKey: key, Now: t0}))
	return key
}

func (b *fsmBundle) claim(leader string, now time.Time, ids ...string) []Claimed {
	b.t.Helper()
	return b.apply(CmdClaim, ClaimDeliveries{IDs: ids, Leader: leader, Now: now, Timeout: 30 * time.Second}).(ClaimResult).Claimed
}

func (b *fsmBundle) state(id string) *Delivery {
	d, ok := b.fsm.Delivery(id)
	require.True(b.t, ok)
	return d
}

func TestStartRunOncePerSlot(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	c := StartRun{Key: RunKey("daily", t0), Rule: "daily", Slot: t0, Now: t0}
	require.Nil(t, b.apply(CmdStartRun, c))
	require.ErrorIs(t, b.apply(CmdStartRun, c).(error), ErrRunExists)
	b.term = 7 // a later leader cannot fire it either
	require.ErrorIs(t, b.apply(CmdStartRun, c).(error), ErrRunExists)
	cur, ok := b.fsm.Cursor("daily")
	require.True(t, ok)
	require.Equal(t, t0, cur)
}

func TestStartRunSkipAlerts(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	require.Nil(t, b.apply(CmdStartRun, StartRun{Key: RunKey("daily", t0), Rule: "daily", Slot: t0, Skip: true, Now: t0.Add(3 * time.Hour)}))
	r, _ := b.fsm.Run(RunKey("daily", t0))
	require.Equal(t, RunSkipped, r.State)
	require.Len(t, b.fsm.Alerts(), 1)
	require.Contains(t, b.fsm.Alerts()[0].Message, "skipped")
}

func TestAddDeliveriesIdempotent(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	key := b.planned("daily", "alice", "bob")
	// A new leader plans the run again: the same ids add nothing.
	again := []NewDelivery{{ID: DeliveryID(key, "alice"), Recipient: "alice"}, {ID: DeliveryID(key, "carol"), Recipient: "carol", NotBefore: t0}}
	require.Equal(t, 1, b.apply(CmdAddDeliveries, AddDeliveries{RunKey: key, Deliveries: again}))
	require.Len(t, b.fsm.RunDeliveries(key), 3)
	require.Error(t, b.apply(CmdAddDeliveries, AddDeliveries{RunKey: "nope"}).(error))
}

func TestClaim(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(b *fsmBundle, id string)
		now     time.Time
		term    uint64
		want    int // claims granted
	}{
		{"pending and due", func(*fsmBundle, string) {}, t0, 1, 1},
		{"not yet due", func(*fsmBundle, string) {}, t0.Add(-time.Second), 1, 0},
		{"past deadline", func(*fsmBundle, string) {}, t0.Add(3 * time.Hour), 1, 0},
		{"claimed by this term, live", func(b *fsmBundle, id string) { b.claim("n1", t0, id) }, t0.Add(time.Second), 1, 0},
		{"claimed, lease expired", func(b *fsmBundle, id string) { b.claim("n1", t0, id) }, t0.Add(31 * time.Second), 1, 1},
		{"claimed by an older term", func(b *fsmBundle, id string) { b.claim("n1", t0, id) }, t0.Add(time.Second), 2, 1},
		{"already sent", func(b *fsmBundle, id string) {
			c := b.claim("n1", t0, id)
			b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: t0, Results: []Settlement{{ID: id, Seq: c[0].Seq, Status: heraldtype.StatusSent}}})
		}, t0.Add(time.Hour), 2, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupFSM(t)
			key := b.planned("daily", "alice")
			id := DeliveryID(key, "alice")
			tc.prepare(b, id)
			b.term = tc.term
			got := b.claim("n2", tc.now, id)
			require.Len(t, got, tc.want)
			if tc.want == 1 {
				require.Equal(t, StateClaimed, b.state(id).State)
				require.Equal(t, "n2", b.state(id).Claim.Leader)
			}
		})
	}
}

func TestRecordResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		res       Settlement
		wantState DeliveryState
		attempts  int
		nextAt    time.Duration // after now, for pending
		alerts    int
	}{
		{"sent", Settlement{Status: heraldtype.StatusSent, ProviderID: "m1"}, StateSent, 1, 0, 0},
		{"retryable", Settlement{Status: heraldtype.StatusRetryable, Error: "busy"}, StatePending, 1, time.Minute, 0},
		{"rate limited spends no attempt", Settlement{Status: heraldtype.StatusRateLimited, RetryAfter: time.Minute}, StatePending, 0, time.Minute, 0},
		{"permanent", Settlement{Status: heraldtype.StatusPermanent, Code: "81013"}, StateFailed, 1, 0, 1},
		{"config alerts the channel too", Settlement{Status: heraldtype.StatusConfig, Code: "40001"}, StateFailed, 1, 0, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupFSM(t)
			id := DeliveryID(b.planned("daily", "alice"), "alice")
			c := b.claim("n1", t0, id)
			r := tc.res
			r.ID, r.Seq = id, c[0].Seq
			now := t0.Add(time.Second)
			require.Equal(t, 1, b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: now, Results: []Settlement{r}}))
			d := b.state(id)
			require.Equal(t, tc.wantState, d.State)
			require.Equal(t, tc.attempts, d.Attempts)
			if tc.wantState == StatePending {
				require.Equal(t, now.Add(tc.nextAt), d.NextAt)
			}
			require.Len(t, b.fsm.Alerts(), tc.alerts)
		})
	}
}

func TestRecordResultsOnlyForItsClaim(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	id := DeliveryID(b.planned("daily", "alice"), "alice")
	old := b.claim("n1", t0, id)
	b.term = 2
	newer := b.claim("n2", t0.Add(time.Second), id)
	require.Equal(t, old[0].Seq+1, newer[0].Seq)
	// The old leader's late answer changes nothing.
	require.Equal(t, 0, b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: t0, Results: []Settlement{{ID: id, Seq: old[0].Seq, Status: heraldtype.StatusPermanent}}}))
	require.Equal(t, StateClaimed, b.state(id).State)
	require.Equal(t, 1, b.apply(CmdRecordResults, RecordResults{Leader: "n2", Now: t0, Results: []Settlement{{ID: id, Seq: newer[0].Seq, Status: heraldtype.StatusSent}}}))
	// A duplicate of the answer changes nothing either.
	require.Equal(t, 0, b.apply(CmdRecordResults, RecordResults{Leader: "n2", Now: t0, Results: []Settlement{{ID: id, Seq: newer[0].Seq, Status: heraldtype.StatusPermanent}}}))
	require.Equal(t, StateSent, b.state(id).State)
}

func TestRetriesExhaust(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	key := b.planned("daily", "alice")
	id := DeliveryID(key, "alice")
	now := t0
	for i := range len(DefaultRetry) + 1 {
		c := b.claim("n1", now, id)
		require.Len(t, c, 1, "attempt %d", i+1)
		require.Equal(t, i+1, c[0].Attempt)
		b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: now, Results: []Settlement{{ID: id, Seq: c[0].Seq, Status: heraldtype.StatusRetryable, Error: "busy"}}})
		now = b.state(id).NextAt
	}
	d := b.state(id)
	require.Equal(t, StateFailed, d.State)
	require.Equal(t, 4, d.Attempts)
	// The failure is remembered so that the rule's next run can carry it.
	require.Equal(t, map[string][]string{"alice": {t0.Format(time.RFC3339)}}, b.fsm.Missed("daily"))
}

func TestExpire(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	id := DeliveryID(b.planned("daily", "alice"), "alice")
	require.Equal(t, 0, b.apply(CmdExpire, Expire{IDs: []string{id}, Now: t0.Add(time.Hour)}))
	require.Equal(t, 1, b.apply(CmdExpire, Expire{IDs: []string{id}, Now: t0.Add(2 * time.Hour)}))
	require.Equal(t, StateExpired, b.state(id).State)
	require.Len(t, b.fsm.Alerts(), 1)
}

func TestMembersAndCursorsAndAlerts(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.apply(CmdUpsertMember, Member{ID: "n1", RaftAddr: "127.0.0.1:7101", HTTPAddr: "127.0.0.1:8101"})
	b.apply(CmdUpsertMember, Member{ID: "n1", RaftAddr: "127.0.0.1:7201", HTTPAddr: "127.0.0.1:8201"})
	b.apply(CmdUpsertMember, Member{ID: "n2"})
	b.apply(CmdRemoveMember, RemoveMember{ID: "n2"})
	require.Equal(t, []Member{{ID: "n1", RaftAddr: "127.0.0.1:7201", HTTPAddr: "127.0.0.1:8201"}}, b.fsm.Members())

	b.apply(CmdInitCursor, InitCursor{Rule: "r", At: t0})
	b.apply(CmdInitCursor, InitCursor{Rule: "r", At: t0.Add(time.Hour)})
	cur, _ := b.fsm.Cursor("r")
	require.Equal(t, t0, cur)

	b.apply(CmdRaiseAlert, RaiseAlert{Cause: "c", Message: "m", Now: t0})
	b.apply(CmdRaiseAlert, RaiseAlert{Cause: "c", Message: "m", Now: t0.Add(time.Minute)})
	require.Len(t, b.fsm.Alerts(), 1)
	require.Equal(t, 2, b.fsm.Alerts()[0].Count)
	require.Nil(t, b.apply(CmdAckAlert, AckAlert{ID: AlertID("c")}))
	require.True(t, b.fsm.Alerts()[0].Acked)
	require.Error(t, b.apply(CmdAckAlert, AckAlert{ID: "nope"}).(error))
}

func TestSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	key := b.planned("daily", "alice", "bob", "carol")
	c := b.claim("n1", t0, DeliveryID(key, "alice"), DeliveryID(key, "bob"))
	b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: t0, Results: []Settlement{{ID: c[0].ID, Seq: c[0].Seq, Status: heraldtype.StatusPermanent}}})
	b.apply(CmdUpsertMember, Member{ID: "n1", HTTPAddr: "127.0.0.1:8101"})

	snap, err := b.fsm.Snapshot()
	require.NoError(t, err)
	// Changes after the snapshot was taken do not leak into it.
	b.apply(CmdUpsertMember, Member{ID: "n9"})
	var buf bytes.Buffer
	require.NoError(t, snap.Persist(&buf))
	snap.Release()

	restored := NewFSM()
	require.NoError(t, restored.Restore(bytes.NewReader(buf.Bytes())))
	require.Len(t, restored.Members(), 1)
	require.Equal(t, b.fsm.RunDeliveries(key), sortedLike(b.fsm.RunDeliveries(key), restored.RunDeliveries(key)))
	require.Equal(t, b.fsm.Missed("daily"), restored.Missed("daily"))
	require.Equal(t, b.fsm.Due(t0.Add(time.Hour), 100), restored.Due(t0.Add(time.Hour), 100))
	require.Equal(t, b.index-1, restored.AppliedIndex())

	require.ErrorContains(t, NewFSM().Restore(bytes.NewReader([]byte(`{"version":99}`+"\n{}"))), "snapshot version 99")
	require.Error(t, NewFSM().Restore(bytes.NewReader([]byte(`{"version":1}`+"\n{\"runs\":"))))
}

// sortedLike orders got by the ids of want (byRun order is insertion order,
// which a restore does not keep).
func sortedLike(want, got []*Delivery) []*Delivery {
	idx := map[string]*Delivery{}
	for _, d := range got {
		idx[d.ID] = d
	}
	out := make([]*Delivery, 0, len(want))
	for _, d := range want {
		out = append(out, idx[d.ID])
	}
	return out
}

// The same log applied twice gives byte-identical snapshots: Apply reads no
// clock and no randomness.
func TestApplyIsDeterministic(t *testing.T) {
	t.Parallel()
	snap := func() []byte {
		b := setupFSM(t)
		key := b.planned("daily", "alice", "bob")
		c := b.claim("n1", t0, DeliveryID(key, "alice"), DeliveryID(key, "bob"))
		b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: t0, Results: []Settlement{{ID: c[0].ID, Seq: c[0].Seq, Status: heraldtype.StatusRetryable}, {ID: c[1].ID, Seq: c[1].Seq, Status: heraldtype.StatusSent}}})
		s, err := b.fsm.Snapshot()
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, s.Persist(&buf))
		return buf.Bytes()
	}
	require.Equal(t, snap(), snap())
}

// signalled says whether ch holds a wake-up, taking it. Apply and Restore
// signal before they return, so no wait is needed.
func signalled(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestSubscribeTopics: a subscription is woken for its topics only, once
// however many changes came (coalescing), by Restore for every topic, and
// no more once ended.
func TestSubscribeTopics(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	anyCh, endAny := b.fsm.Subscribe()
	defer endAny()
	tasks, endTasks := b.fsm.Subscribe(TasksChange)
	defer endTasks()
	both, endBoth := b.fsm.Subscribe(AnyChange, TasksChange)

	b.apply(CmdUpsertMember, Member{ID: "n1"})
	b.apply(CmdUpsertMember, Member{ID: "n2"})
	require.True(t, signalled(anyCh), "every Apply wakes AnyChange")
	require.False(t, signalled(anyCh), "two changes, one wake-up")
	require.False(t, signalled(tasks), "a member is not a task change")
	require.True(t, signalled(both))

	b.apply(CmdSubmitTask, SubmitTask{Key: "k", Rule: "r", DueAt: t0.Add(time.Hour), Now: t0})
	require.True(t, signalled(anyCh))
	require.True(t, signalled(tasks), "a submitted task wakes TasksChange")
	require.True(t, signalled(both))
	require.False(t, signalled(both), "one wake-up for both topics of one Apply")

	endBoth()
	snap, err := b.fsm.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, snap.Persist(&buf))
	require.NoError(t, b.fsm.Restore(&buf))
	require.True(t, signalled(anyCh), "a restore wakes AnyChange")
	require.True(t, signalled(tasks), "a restore wakes TasksChange")
	require.False(t, signalled(both), "an ended subscription is not woken")
}
