package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// stopOf applies cmd and returns what the FSM stopped on (nil if it
// applied).
func stopOf(t *testing.T, f *FSM, index uint64, cmd []byte) (stopped error) {
	t.Helper()
	f.SetHalt(func(err error) { panic(haltPanic{err}) })
	defer func() {
		if r := recover(); r != nil {
			h, ok := r.(haltPanic)
			require.True(t, ok, "a bare panic, not a halt: %v", r)
			stopped = h.err
		}
	}()
	f.Apply(index, 1, cmd)
	return nil
}

type haltPanic struct{ err error }

func TestApplyStopsClearlyOnUnreadableCommands(t *testing.T) {
	t.Parallel()
	f := NewFSM()
	// A member that runs a newer build is named as the way out.
	m, _ := Encode(CmdUpsertMember, Member{ID: "n2", RaftAddr: "a", HTTPAddr: "b", FSMVersion: 9, Build: "v9"})
	f.Apply(1, 1, m)

	for name, tc := range map[string]struct {
		cmd  []byte
		want string
	}{
		"unknown type":    {[]byte{100, 1, '{', '}'}, "cannot apply log entry 2 (command(100), body version 1): the command type is unknown to this build (written by a newer one)"},
		"unknown version": {[]byte{byte(CmdStartRun), 99, '{', '}'}, "(StartRun, body version 99): this build reads body versions 1 to 2"},
		"version zero":    {[]byte{byte(CmdStartRun), 0, '{', '}'}, "this build reads body versions 1 to 2"},
		"bad json":        {[]byte{byte(CmdStartRun), 1, '{'}, "(StartRun, body version 1): the body does not decode"},
		"unknown field":   {[]byte(string([]byte{byte(CmdAckAlert), 1}) + `{"id":"x","new_field":1}`), `json: unknown field "new_field"`},
		"trailing data":   {[]byte(string([]byte{byte(CmdAckAlert), 1}) + `{"id":"x"}{}`), "data after the body"},
		"too short":       {[]byte{1}, "a command of 1 bytes is too short"},
	} {
		err := stopOf(t, f, 2, tc.cmd)
		require.ErrorIs(t, err, ErrUnreadableCommand, name)
		require.Contains(t, err.Error(), tc.want, name)
		require.Contains(t, err.Error(), fmt.Sprintf("applies FSM version %d", FSMVersion), name)
		if name == "unknown type" {
			require.Contains(t, err.Error(), "upgrade this node to a build that applies FSM version 9 or later (member n2, build v9)")
		}
	}
	require.Len(t, f.Members(), 1, "nothing else applied")
}

func TestApplySkipsIgnorableUnknownCommands(t *testing.T) {
	t.Parallel()
	f := NewFSM()
	require.NoError(t, stopOf(t, f, 1, []byte{byte(CmdIgnorable | 100), 1, '{', '}'}))
	require.Equal(t, uint64(1), f.AppliedIndex(), "skipped, but the index moves on")
	// A known type with the flag and a body version this build does not
	// read is skipped too: the writer said an older build may.
	require.NoError(t, stopOf(t, f, 2, []byte{byte(CmdIgnorable | CmdAckAlert), 7, '{', '}'}))
	// Without the flag, the same stops the node.
	require.Error(t, stopOf(t, f, 3, []byte{byte(CmdAckAlert), 7, '{', '}'}))
}

func TestEveryCommandIsDispatched(t *testing.T) {
	t.Parallel()
	f := NewFSM()
	var i uint64
	for ct, spec := range commandSpecs {
		i++
		err := stopOf(t, f, i, []byte{byte(ct), spec.latest(), '{', '}'})
		if err != nil {
			require.NotContains(t, err.Error(), "does not dispatch", "%s", ct)
		}
		require.NotEmpty(t, spec.name)
		for v := 1; v < len(spec.since); v++ {
			require.LessOrEqual(t, spec.since[v-1], spec.since[v], "%s: versions come in FSM order", ct)
		}
		require.LessOrEqual(t, spec.since[len(spec.since)-1], FSMVersion, "%s is newer than FSMVersion", ct)
	}
}

// TestVersion1Bodies decodes bodies as the builds before FSM version 2
// wrote them (omitempty on retry, no member versions): every later build
// must read them and build the same state.
func TestVersion1Bodies(t *testing.T) {
	t.Parallel()
	f := NewFSM()
	slot := "2026-12-01T01:00:00Z"
	key := "daily@" + slot
	for i, c := range []string{
		"\x05\x01" + `{"id":"n1","raft_addr":"127.0.0.1:7101","http_addr":"127.0.0.1:8101"}`,
		"\x01\x01" + `{"key":"` + key + `","rule":"daily","slot":"` + slot + `","zone":"Asia/Shanghai","date":"2026-12-01","rules_hash":"abc","now":"` + slot + `"}`,
		"\x02\x01" + `{"run_key":"` + key + `","deliveries":[{"id":"d1","recipient":"alice","channel":"mock","payload":{"msgtype":"text","content":"hi"},"priority":2,"not_before":"` + slot + `","deadline":"2026-12-01T03:00:00Z"},` +
			`{"id":"d2","recipient":"bob","channel":"mock","payload":{},"priority":1,"not_before":"` + slot + `","deadline":"2026-12-01T03:00:00Z","retry":[60000000000]}]}`,
		"\x08\x01" + `{"run_key":"` + key + `","now":"` + slot + `"}`,
	} {
		require.NoError(t, stopOf(t, f, uint64(i+1), []byte(c)), "entry %d", i+1)
	}
	m := f.Members()
	require.Equal(t, []Member{{ID: "n1", RaftAddr: "127.0.0.1:7101", HTTPAddr: "127.0.0.1:8101"}}, m)
	require.Equal(t, uint16(1), m[0].AppliesFSM(), "a member record without a version is a build before versions")
	d1, _ := f.Delivery("d1")
	require.Nil(t, d1.Retry)
	require.False(t, d1.NoRetry)
	w, ok := d1.retryWait(1)
	require.True(t, ok)
	require.Equal(t, time.Minute, w, "absent retry is the default")
	d2, _ := f.Delivery("d2")
	require.Equal(t, []time.Duration{time.Minute}, d2.Retry)
}

// TestEmptyRetryMeansNoRetry: retry = {} in a rule is one attempt only, in
// the log and across a snapshot (gob cannot tell an empty list from none).
func TestEmptyRetryMeansNoRetry(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	key := RunKey("once", t0)
	require.Nil(t, b.apply(CmdStartRun, StartRun{Key: key, Rule: "once", Slot: t0, Now: t0}))
	nd := NewDelivery{ID: "d", Recipient: "alice", Channel: "mock", Payload: json.RawMessage(`{}`),
		Priority: heraldtype.PriorityNormal, NotBefore: t0, Deadline: t0.Add(time.Hour), Retry: []time.Duration{}}
	cmd, err := Encode(CmdAddDeliveries, AddDeliveries{RunKey: key, Deliveries: []NewDelivery{nd}})
	require.NoError(t, err)
	require.Equal(t, byte(2), cmd[1])
	require.Contains(t, string(cmd), `"retry":[]`)
	b.index++
	require.Equal(t, 1, b.fsm.Apply(b.index, 1, cmd))

	c := b.claim("n1", t0, "d")
	require.Len(t, c, 1)
	b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: t0, Results: []Settlement{{ID: "d", Seq: c[0].Seq, Status: heraldtype.StatusRetryable, Error: "503"}}})
	require.Equal(t, StateFailed, b.state("d").State, "no retry after the one attempt")

	restored := roundTrip(t, b.fsm)
	d, ok := restored.Delivery("d")
	require.True(t, ok)
	require.True(t, d.NoRetry, "a snapshot keeps 'do not retry'")
	_, again := d.retryWait(1)
	require.False(t, again)
}

func roundTrip(t *testing.T, f *FSM) *FSM {
	t.Helper()
	s, err := f.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, s.Persist(&buf))
	out := NewFSM()
	require.NoError(t, out.Restore(&buf))
	return out
}

func TestAdmitWaitsForOlderMembers(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.apply(CmdUpsertMember, Member{ID: "n1", FSMVersion: FSMVersion})
	b.apply(CmdUpsertMember, Member{ID: "n2"}) // a build before FSM versions
	key := RunKey("r", t0)
	body := func(retry []time.Duration) []byte {
		cmd, err := Encode(CmdAddDeliveries, AddDeliveries{RunKey: key, Deliveries: []NewDelivery{{ID: "d", Retry: retry}}})
		require.NoError(t, err)
		return cmd
	}
	require.Equal(t, uint16(1), b.fsm.OldestMemberFSM())

	// Said as well in version 1: written as version 1.
	out, err := b.fsm.Admit(body([]time.Duration{time.Minute}))
	require.NoError(t, err)
	require.Equal(t, byte(1), out[1])
	out, err = b.fsm.Admit(body(nil))
	require.NoError(t, err)
	require.Equal(t, byte(1), out[1])

	// "Do not retry" cannot be said in version 1: it waits, naming n2.
	_, err = b.fsm.Admit(body([]time.Duration{}))
	require.ErrorIs(t, err, ErrMembersBehind)
	require.EqualError(t, err, "AddDeliveries needs FSM version 2 on every member; waiting for n2 (FSM version 1) to be upgraded")

	// A command this build does not know is never proposed.
	_, err = b.fsm.Admit([]byte{100, 1, '{', '}'})
	require.Error(t, err)

	b.apply(CmdUpsertMember, Member{ID: "n2", FSMVersion: FSMVersion})
	out, err = b.fsm.Admit(body([]time.Duration{}))
	require.NoError(t, err)
	require.Equal(t, byte(2), out[1])
}

func TestEncodeRefusesUnknownTypes(t *testing.T) {
	t.Parallel()
	_, err := Encode(100, struct{}{})
	require.EqualError(t, err, fmt.Sprintf("encode %s: not in the command table", CommandType(100)))
}

func TestRestoreRefusesSnapshotsFromNewerBuilds(t *testing.T) {
	t.Parallel()
	f := NewFSM()
	err := f.Restore(strings.NewReader(`{"version":2,"applied":5,"fsm_version":9}` + "\n"))
	require.ErrorContains(t, err, fmt.Sprintf("snapshot written by a build that applies FSM version 9; this build (devel) applies %d", FSMVersion))

	// The header says which FSM version the snapshot needs: 2 for a state
	// with nothing of version 3 (see snapshotFSM).
	s, err := f.Snapshot()
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, s.Persist(&buf))
	line, _, _ := strings.Cut(buf.String(), "\n")
	require.JSONEq(t, `{"version":2,"applied":0,"fsm_version":2}`, line)
}

// A JSON RecordResults whose result for a current claim has a status no
// build knows stops the node clearly, as its packed twin does, rather than
// panicking in Apply (a stack trace from Raft's apply loop); one for a
// claim that is no longer current changes nothing, as it always did.
func TestUnknownStatusStopsClearly(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	id := DeliveryID(b.planned("r", "alice"), "alice")
	c := b.claim("n1", t0, id)
	require.Len(t, c, 1)
	stale, err := Encode(CmdRecordResults, RecordResults{Leader: "n1", Now: t0, Results: []Settlement{{ID: id, Seq: c[0].Seq + 1, Status: 9}}})
	require.NoError(t, err)
	require.Nil(t, stopOf(t, b.fsm, b.index+1, stale), "a stale answer is skipped")
	b.index++
	cmd, err := Encode(CmdRecordResults, RecordResults{Leader: "n1", Now: t0, Results: []Settlement{{ID: id, Seq: c[0].Seq, Status: 9}}})
	require.NoError(t, err)
	err = stopOf(t, b.fsm, b.index+1, cmd)
	require.ErrorIs(t, err, ErrUnreadableCommand)
	require.Contains(t, err.Error(), "unknown status 9")
}
