package engine

import (
	"bufio"
	"bytes"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// busyLog applies round r of a workload that touches every part of the
// state: runs, deliveries through every transition (claims, retries, rate
// limits, sends, failures, expiries, cancels), missed slots made good,
// daily aggregates, alerts (raised, repeated, acknowledged, notified),
// tasks, members, cursors, compensation and pruning.
func busyLog(b *fsmBundle, r int) {
	b.t.Helper()
	slot := t0.Add(time.Duration(r) * 24 * time.Hour)
	now := slot
	key := RunKey("daily", slot)
	b.apply(CmdInitCursor, InitCursor{Rule: "daily", At: t0.Add(-time.Hour)})
	b.apply(CmdStartRun, StartRun{Key: key, Rule: "daily", Slot: slot, Date: slot.Format(time.DateOnly), Now: now})
	who := []string{"alice", "bob", "carol", "dave"}
	var nds []NewDelivery
	for _, w := range who {
		deadline := slot.Add(time.Hour)
		if w == "dave" {
			deadline = slot.Add(48 * time.Hour) // settled in the next round
		}
		nds = append(nds, NewDelivery{ID: DeliveryID(key, w), Recipient: w, Channel: "mock", Priority: heraldtype.PriorityNormal,
			Payload: []byte(`{"msgtype":"text","content":"` + w + `"}`), NotBefore: slot, Deadline: deadline,
			Retry: []time.Duration{time.Minute}})
	}
	b.apply(CmdAddDeliveries, AddDeliveries{RunKey: key, Deliveries: nds})
	b.apply(CmdFinishPlan, FinishPlan{RunKey: key, Now: now})
	ids := make([]string, len(who))
	for i, w := range who {
		ids[i] = DeliveryID(key, w)
	}
	c := b.claim("n1", now, ids...)
	res := make([]Settlement, len(c))
	for i, cl := range c {
		res[i] = Settlement{ID: cl.ID, Seq: cl.Seq, Status: heraldtype.StatusSent, ProviderID: "p"}
	}
	// alice fails on odd days and is made good on even ones; bob is
	// retried, then fails; carol is rate limited, then expires.
	if r%2 == 1 {
		res[0].Status, res[0].Code, res[0].Error = heraldtype.StatusPermanent, fmt.Sprint(40000+r), "no"
	}
	res[1].Status, res[1].Error = heraldtype.StatusRetryable, "busy"
	res[2].Status, res[2].RetryAfter = heraldtype.StatusRateLimited, time.Minute
	res[3].Status, res[3].RetryAfter = heraldtype.StatusRateLimited, time.Hour
	b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: now.Add(time.Second), Results: res})
	now = now.Add(2 * time.Minute)
	c = b.claim("n1", now, ids[1])
	b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: now, Results: []Settlement{{ID: c[0].ID, Seq: c[0].Seq, Status: heraldtype.StatusRetryable, Error: "busy again"}}})
	b.apply(CmdExpire, Expire{IDs: ids, Now: slot.Add(2 * time.Hour)})
	// dave of the day before: failed or sent now, into that day's figures.
	if r > 0 {
		prev := DeliveryID(RunKey("daily", slot.Add(-24*time.Hour)), "dave")
		if c := b.claim("n1", now, prev); len(c) == 1 {
			st := heraldtype.StatusSent
			if r%3 == 0 {
				st = heraldtype.StatusPermanent
			}
			b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: now, Results: []Settlement{{ID: prev, Seq: c[0].Seq, Status: st, Code: fmt.Sprint(r)}}})
		}
	}
	b.apply(CmdCompensated, Compensated{IDs: ids[:1]})

	b.apply(CmdRaiseAlert, RaiseAlert{Cause: "stuck:mock", Message: fmt.Sprint("stuck ", r%3), Now: now})
	b.apply(CmdAckAlert, AckAlert{ID: AlertID("stuck:mock")})
	for _, al := range b.fsm.Alerts() {
		b.apply(CmdNotifyAlert, NotifyAlert{ID: al.ID, Seq: al.Notified + 1, Interval: time.Hour, Rule: "ops_alert", Data: []byte(`{}`), Now: now})
	}
	tk := fmt.Sprint("task-", r)
	b.apply(CmdSubmitTask, SubmitTask{Key: tk, Rule: "r", DueAt: slot.Add(time.Hour), Data: []byte(`{"n":1}`), Now: now})
	if r%2 == 0 {
		b.apply(CmdCancelTask, CancelTask{Key: tk, Now: now})
	} else {
		b.apply(CmdStartRun, StartRun{Key: TaskRunKey(tk), Rule: "r", Slot: slot.Add(time.Hour), TaskKey: tk, Now: slot.Add(time.Hour)})
	}
	b.apply(CmdUpsertMember, Member{ID: fmt.Sprint("n", r%5), HTTPAddr: fmt.Sprint("127.0.0.1:", 8100+r)})
	b.apply(CmdRemoveMember, RemoveMember{ID: fmt.Sprint("n", (r+2)%5)})
	if r%5 == 4 {
		b.apply(CmdPrune, Prune{Before: slot.Add(-3 * 24 * time.Hour), LedgerBefore: slot.Add(-6 * 24 * time.Hour), Now: slot})
	}
}

func persist(t *testing.T, s Snapshot) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, s.Persist(&buf))
	s.Release()
	return buf.Bytes()
}

// Records are never mutated once stored: a snapshot persisted while (and
// after) many more commands are applied is byte for byte the one persisted
// at once. Run with -race: Persist reads what Apply must not write.
func TestSnapshotIsImmutableWhileApplyGoesOn(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	for r := range 12 {
		busyLog(b, r)
	}
	early, err := b.fsm.Snapshot()
	require.NoError(t, err)
	during, err := b.fsm.Snapshot()
	require.NoError(t, err)
	late, err := b.fsm.Snapshot()
	require.NoError(t, err)
	want := persist(t, early)

	done := make(chan []byte)
	go func() {
		var buf bytes.Buffer
		_ = during.Persist(&buf) // checked below, against want
		done <- buf.Bytes()
	}()
	for r := 12; r < 40; r++ {
		busyLog(b, r)
	}
	require.Equal(t, string(want), string(<-done), "persisted concurrently with Apply")
	require.Equal(t, string(want), string(persist(t, late)), "persisted after Apply went on")

	again, err := b.fsm.Snapshot()
	require.NoError(t, err)
	require.NotEqual(t, string(want), string(persist(t, again)), "the workload changed nothing")
}

// persistV1 writes a snapshot as version 1 did: the header line, then the
// whole state as one JSON document.
func persistV1(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	require.NoError(t, err)
	s := snap.(*fsmSnapshot)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	require.NoError(t, enc.Encode(snapshotHeader{Version: 1, Applied: s.applied}))
	require.NoError(t, enc.Encode(s.st.v1()))
	return buf.Bytes()
}

func busyFSM(t *testing.T, rounds int) *fsmBundle {
	b := setupFSM(t)
	for r := range rounds {
		busyLog(b, r)
	}
	return b
}

// A node upgraded over a version-1 snapshot restores all of it: written out
// again, it is byte for byte what the node that applied the log writes; and
// a snapshot restored and written again is the same bytes.
func TestSnapshotVersions(t *testing.T) {
	t.Parallel()
	for _, cancel := range []bool{false, true} { // most tasks pending, or not
		t.Run(fmt.Sprint("cancelled ", cancel), func(t *testing.T) {
			t.Parallel()
			b := busyFSM(t, 30)
			for i := range 500 {
				key := fmt.Sprint("wait-", i)
				b.apply(CmdSubmitTask, SubmitTask{Key: key, Rule: "r", DueAt: t0.Add(time.Duration(i%7) * time.Hour), Now: t0})
				if cancel {
					b.apply(CmdCancelTask, CancelTask{Key: key, Now: t0})
				}
			}
			testSnapshotVersions(t, b)
		})
	}
}

func testSnapshotVersions(t *testing.T, b *fsmBundle) {
	s, err := b.fsm.Snapshot()
	require.NoError(t, err)
	want := persist(t, s)
	require.True(t, bytes.HasPrefix(want, []byte(`{"version":2,"applied":`)))

	for name, in := range map[string][]byte{"version 1": persistV1(t, b.fsm), "version 2": want} {
		r := NewFSM()
		require.NoError(t, r.Restore(bytes.NewReader(in)), name)
		s, err := r.Snapshot()
		require.NoError(t, err)
		require.Equal(t, string(want), string(persist(t, s)), name)
		require.Equal(t, b.fsm.AppliedIndex(), r.AppliedIndex())
		now := t0.Add(40 * 24 * time.Hour)
		require.Equal(t, b.fsm.Due(now, 1000), r.Due(now, 1000), name)
		for _, st := range []TaskState{0, TaskPending, TaskFired, TaskCancelled} {
			tasks, _ := r.ListTasks(TaskFilter{State: st})
			want, _ := b.fsm.ListTasks(TaskFilter{State: st})
			require.Equal(t, want, tasks, "%s: %s tasks", name, st)
		}
		require.Equal(t, b.fsm.DueTasks(now, 10000), r.DueTasks(now, 10000), name)
		require.Equal(t, b.fsm.PlanningRuns(), r.PlanningRuns(), name)
	}
}

// A damaged snapshot is refused with an error, never a panic, and leaves
// the state as it was.
func TestRestoreRefusesBadSnapshots(t *testing.T) {
	t.Parallel()
	good := func() []byte {
		s, err := busyFSM(t, 6).fsm.Snapshot()
		require.NoError(t, err)
		return persist(t, s)
	}()
	header := good[:bytes.IndexByte(good, '\n')+1]
	stream := func(write func(enc *gob.Encoder)) []byte {
		var buf bytes.Buffer
		buf.Write(header)
		write(gob.NewEncoder(&buf))
		return buf.Bytes()
	}
	cases := map[string][]byte{
		"empty":         nil,
		"not json":      []byte("hello\n"),
		"newer version": []byte(`{"version":3,"applied":1}` + "\n"),
		"header only":   header,
		"no end":        good[:len(good)-20],
		"unknown section": stream(func(enc *gob.Encoder) {
			_ = enc.Encode(section{Name: "wormholes", Count: 0})
		}),
		"missing section": stream(func(enc *gob.Encoder) {
			_ = enc.Encode(section{Name: "runs"})
			_ = enc.Encode(section{Name: sectionEnd})
		}),
		"fewer records than counted": stream(func(enc *gob.Encoder) {
			_ = enc.Encode(section{Name: "runs", Count: 2})
			_ = enc.Encode(&Run{Key: "a"})
		}),
		"claimed without a claim": stream(func(enc *gob.Encoder) {
			for _, name := range []string{"runs", "cursors", "members", "alerts", "missed", "tasks", "ledger", "compensate", "daily"} {
				_ = enc.Encode(section{Name: name})
			}
			_ = enc.Encode(section{Name: "deliveries", Count: 1})
			_ = enc.Encode(&Delivery{ID: "d", State: StateClaimed})
			_ = enc.Encode(section{Name: sectionEnd})
		}),
	}
	for n := len(header) + 1; n < len(good); n += 1 + n/8 {
		cases[fmt.Sprint("cut at ", n)] = good[:n]
	}
	for i := len(header); i < len(good); i += 1 + i/6 {
		flipped := bytes.Clone(good)
		flipped[i] ^= 0x5a
		cases[fmt.Sprint("byte ", i, " flipped")] = flipped
	}
	// Refused by the header: the state is kept. Past it, a node that held
	// a state has let it go (one state at a time, not two) and stops
	// through its halt func; a node that held none gets the error.
	byHeader := map[string]bool{"empty": true, "not json": true, "newer version": true}
	for name, in := range cases {
		f := busyFSM(t, 2).fsm
		var halted error
		f.SetHalt(func(err error) { halted = err; panic(haltedRestore{}) })
		before := persistV1(t, f)
		err := restoreRecovering(f, in)
		if strings.HasPrefix(name, "byte ") && err == nil {
			continue // a flip inside a string or a time may still decode
		}
		require.Error(t, err, name)
		if byHeader[name] {
			require.NotContains(t, err.Error(), "panic", name)
			require.Nil(t, halted, name)
			require.True(t, bytes.Equal(before, persistV1(t, f)), "%s: the state changed", name)
			continue
		}
		var re *RestoreError
		require.ErrorAs(t, halted, &re, "%s: the node went on with its state let go", name)
		require.Zero(t, f.AppliedIndex(), name)

		fresh := NewFSM()
		err = restoreRecovering(fresh, in)
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), "panic", name)
		require.Zero(t, fresh.AppliedIndex(), name)
	}
}

// haltedRestore is what the tests' halt funcs panic with.
type haltedRestore struct{}

// restoreRecovering restores in into f, a panic (a halt) as an error.
func restoreRecovering(f *FSM, in []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f.Restore(bytes.NewReader(in))
}

// TestRestoreLetsTheOldStateGo: while a snapshot's body is read, the state
// it replaces is no longer held (a node holds one state, not two), and a
// read meanwhile sees an empty one, not a half-read one.
func TestRestoreLetsTheOldStateGo(t *testing.T) {
	t.Parallel()
	old := busyFSM(t, 6)
	s, err := busyFSM(t, 3).fsm.Snapshot()
	require.NoError(t, err)
	raw := persist(t, s)
	require.NotEmpty(t, old.fsm.Runs(func(*Run) bool { return true }))
	var seen []int
	r := &midRead{r: bytes.NewReader(raw), at: len(raw) / 2, fn: func() {
		seen = append(seen, len(old.fsm.Runs(func(*Run) bool { return true })), int(old.fsm.AppliedIndex()))
	}}
	require.NoError(t, old.fsm.Restore(r))
	require.Equal(t, []int{0, 0}, seen, "mid-read: runs and applied index")
	require.NotEmpty(t, old.fsm.Runs(func(*Run) bool { return true }))
}

// midRead calls fn once, when at bytes of r have been read.
type midRead struct {
	r    io.Reader
	n    int
	at   int
	fn   func()
	done bool
}

func (m *midRead) Read(p []byte) (int, error) {
	if !m.done && m.n >= m.at {
		m.done = true
		m.fn()
	}
	p = p[:min(len(p), 4096)]
	n, err := m.r.Read(p)
	m.n += n
	return n, err
}

// While a member still runs a build of FSM version 1, nothing of version 2
// is in the state (the leader admits no such command), and a snapshot the
// leader sends that member (a follower too far behind for the log) must
// hold only the sections that build reads: it refuses an unknown section,
// even an empty one, and would stay behind until it is upgraded.
func TestSnapshotOfVersion1StateHasOnlyVersion1Sections(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.planned("daily_report", "alice", "bob")
	require.Nil(t, b.apply(CmdUpsertMember, Member{ID: "n1", RaftAddr: "127.0.0.1:7101", HTTPAddr: "127.0.0.1:8101"}))

	snap, err := b.fsm.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, snap.Persist(&buf))
	br := bufio.NewReader(&buf)
	_, err = br.ReadBytes('\n') // the header
	require.NoError(t, err)
	dec := gob.NewDecoder(br)
	st := newState()
	st.payloads = map[string]json.RawMessage{} // as readVersion2 does
	for {
		var sec section
		require.NoError(t, dec.Decode(&sec))
		if sec.Name == sectionEnd {
			break
		}
		require.Contains(t, requiredSections, sec.Name, "a build of FSM version 1 cannot read section %q", sec.Name)
		for range sec.Count {
			require.NoError(t, sectionReaders[sec.Name](dec, st))
		}
	}
}
