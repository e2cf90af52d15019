package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// packedSample is a body of each packed command that uses every field and
// flag: varying and repeated channels, payloads, priorities, times and
// retries (none, "do not retry", a list), hex and other ids, every status
// and optional field of a result.
func packedSample() (AddDeliveries, ClaimDeliveries, RecordResults) {
	key := RunKey("daily", t0)
	hexID := func(r string) string { return DeliveryID(key, r) }
	p := json.RawMessage(`{"msgtype":"text","content":"hi"}`)
	add := AddDeliveries{RunKey: key, Deliveries: []NewDelivery{
		{ID: hexID("alice"), Recipient: "alice", Channel: "mock", Payload: p, Priority: heraldtype.PriorityNormal, NotBefore: t0, Deadline: t0.Add(2 * time.Hour)},
		{ID: hexID("bob"), Recipient: "bob", Channel: "mock", Payload: p, Priority: heraldtype.PriorityNormal, NotBefore: t0, Deadline: t0.Add(2 * time.Hour)},
		{ID: "d-plain", Recipient: "carol", Channel: "wecom", Payload: json.RawMessage(`{"x":1}`), Priority: heraldtype.PriorityHigh,
			NotBefore: t0.Add(1500 * time.Millisecond), Deadline: time.Time{}, Retry: []time.Duration{}},
		{ID: hexID("dave"), Recipient: "dave", Channel: "wecom", Payload: json.RawMessage(`{"x":1}`), Priority: heraldtype.PriorityLow,
			NotBefore: t0.Add(-time.Hour), Deadline: time.Time{}, Retry: []time.Duration{time.Minute, 5 * time.Minute}},
		{ID: "", Recipient: "", Channel: "wecom", Payload: json.RawMessage(`null`), Priority: heraldtype.PriorityLow,
			NotBefore: t0.Add(-time.Hour), Deadline: t0, Retry: []time.Duration{time.Minute, 5 * time.Minute}},
	}}
	claim := ClaimDeliveries{IDs: []string{hexID("alice"), hexID("bob"), "d-plain", hexID("dave")}, Leader: "n1", Now: t0.Add(2 * time.Second), Timeout: 30 * time.Second}
	res := RecordResults{Leader: "n1", Now: t0.Add(3*time.Second + 7), Results: []Settlement{
		{ID: hexID("alice"), Seq: 1, Status: heraldtype.StatusSent, ProviderID: "msg-1"},
		{ID: hexID("bob"), Seq: 1, Status: heraldtype.StatusRateLimited, RetryAfter: 90 * time.Second, Code: "45009", Error: "slow down"},
		{ID: "d-plain", Seq: 1, Status: heraldtype.StatusRetryable, Error: "503"},
		{ID: hexID("dave"), Seq: 1, Status: heraldtype.StatusConfig, Code: "40014", Error: "bad token"},
		{ID: hexID("erin"), Seq: 300, Status: heraldtype.StatusPermanent},
	}}
	return add, claim, res
}

// TestPackedBodiesRoundTrip: each packed body decodes to what was encoded,
// and is much smaller than its JSON.
func TestPackedBodiesRoundTrip(t *testing.T) {
	t.Parallel()
	add, claim, res := packedSample()
	for _, tc := range []struct {
		t      CommandType
		body   any
		decode func([]byte) (any, error)
	}{
		{CmdAddDeliveries, add, func(b []byte) (any, error) { return unpackAddDeliveries(b) }},
		{CmdClaim, claim, func(b []byte) (any, error) { return UnpackClaim(b) }},
		{CmdRecordResults, res, func(b []byte) (any, error) { return unpackRecordResults(b) }},
	} {
		packed, err := EncodeFor(tc.t, tc.body, FSMVersion)
		require.NoError(t, err)
		require.Equal(t, byte(packedOf[tc.t]), packed[0])
		require.Equal(t, byte(1), packed[1])
		got, err := tc.decode(packed[2:])
		require.NoError(t, err, "%s", tc.t)
		require.Equal(t, tc.body, got, "%s", tc.t)
		js, err := Encode(tc.t, tc.body)
		require.NoError(t, err)
		require.Less(t, len(packed), len(js)*2/3, "%s: packed %d bytes, JSON %d", tc.t, len(packed), len(js))
	}
}

// TestEncodeForOlderMembers: while a member's build applies FSM version 1
// only, the burst's commands are written as JSON, which it reads.
func TestEncodeForOlderMembers(t *testing.T) {
	t.Parallel()
	_, claim, _ := packedSample()
	cmd, err := EncodeFor(CmdClaim, claim, 1)
	require.NoError(t, err)
	want, err := Encode(CmdClaim, claim)
	require.NoError(t, err)
	require.Equal(t, want, cmd)
	cmd, err = EncodeFor(CmdStartRun, StartRun{Key: "k", Rule: "r"}, FSMVersion)
	require.NoError(t, err)
	require.Equal(t, byte(CmdStartRun), cmd[0], "a command without a packed twin is JSON")

	b := setupFSM(t)
	b.apply(CmdUpsertMember, Member{ID: "n2"}) // a build before FSM versions
	packed, err := EncodeFor(CmdClaim, claim, FSMVersion)
	require.NoError(t, err)
	_, err = b.fsm.Admit(packed)
	require.ErrorIs(t, err, ErrMembersBehind, "never proposed to a member that cannot read it")
}

// TestPackedAppliesAsJSON applies the same commands, JSON to one FSM and
// packed to another: the two states are the same, byte for byte.
func TestPackedAppliesAsJSON(t *testing.T) {
	t.Parallel()
	add, claim, res := packedSample()
	add.Deliveries = add.Deliveries[:4] // the empty id is for the codec only
	snap := func(oldest uint16) []byte {
		b := setupFSM(t)
		require.Nil(t, b.apply(CmdStartRun, StartRun{Key: add.RunKey, Rule: "daily", Slot: t0, Now: t0}))
		for _, c := range []struct {
			t    CommandType
			body any
		}{{CmdAddDeliveries, add}, {CmdClaim, claim}, {CmdRecordResults, res}} {
			cmd, err := EncodeFor(c.t, c.body, oldest)
			require.NoError(t, err)
			b.index++
			out := b.fsm.Apply(b.index, b.term, cmd)
			require.NotNil(t, out)
			if _, isErr := out.(error); isErr {
				t.Fatalf("%s: %v", c.t, out)
			}
		}
		s, err := b.fsm.Snapshot()
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, s.Persist(&buf))
		return buf.Bytes()
	}
	js, packed := snap(1), snap(FSMVersion)
	require.Equal(t, js, packed)
}

// TestPackedBodiesAreStrict: a body that is cut short anywhere, has bytes
// after it, or says something no writer writes stops the node with a
// reason; it never panics.
func TestPackedBodiesAreStrict(t *testing.T) {
	t.Parallel()
	add, claim, res := packedSample()
	for _, body := range []any{add, claim, res} {
		var ct CommandType
		switch body.(type) {
		case AddDeliveries:
			ct = CmdAddDeliveries
		case ClaimDeliveries:
			ct = CmdClaim
		case RecordResults:
			ct = CmdRecordResults
		}
		cmd, err := EncodeFor(ct, body, FSMVersion)
		require.NoError(t, err)
		for cut := 2; cut < len(cmd); cut++ {
			require.Error(t, unpackAny(cmd[0], cmd[2:cut]), "%s cut at %d", ct, cut)
		}
		require.Error(t, unpackAny(cmd[0], append(cmd[2:len(cmd):len(cmd)], 0)), "%s with a byte after it", ct)
	}

	key := packString(nil, "k")
	for name, tc := range map[string]struct {
		t    CommandType
		body []byte
		want string
	}{
		"huge count": {CmdClaimPacked, cat(packString(nil, "n1"), packTime(nil, t0), []byte{0}, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}), "does not fit"},
		"overlong varint": {CmdClaimPacked, cat(packString(nil, "n1"), packTime(nil, t0),
			[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}), "overlong varint"},
		"hex id written long":   {CmdClaimPacked, cat(packString(nil, "n1"), packTime(nil, t0), []byte{0, 1, 33}, []byte(DeliveryID("k", "a"))), "hex id written long"},
		"unknown status":        {CmdRecordResultsPacked, cat(packString(nil, "n1"), packTime(nil, t0), []byte{1}, packID(nil, "d"), []byte{1, 9, 0}), "unknown status 9"},
		"unknown result flag":   {CmdRecordResultsPacked, cat(packString(nil, "n1"), packTime(nil, t0), []byte{1}, packID(nil, "d"), []byte{1, 1, 0x40}), "unknown flags"},
		"empty flagged field":   {CmdRecordResultsPacked, cat(packString(nil, "n1"), packTime(nil, t0), []byte{1}, packID(nil, "d"), []byte{1, 1, hasCode, 0}), "flagged but empty"},
		"first repeats":         {CmdAddDeliveriesPacked, cat(key, []byte{1}, packID(nil, "d"), packString(nil, "alice"), []byte{sameChannel}), "repeats a field of none"},
		"unknown delivery flag": {CmdAddDeliveriesPacked, cat(key, []byte{1}, packID(nil, "d"), packString(nil, "alice"), []byte{0x80}), "unknown flags"},
		"empty payload":         {CmdAddDeliveriesPacked, cat(key, []byte{1}, packID(nil, "d"), packString(nil, "alice"), []byte{0}, packString(nil, "mock"), []byte{0}), "empty payload"},
		"unknown time form":     {CmdClaimPacked, cat(packString(nil, "n1"), []byte{2}), "unknown time form"},
		"zero time as instant":  {CmdClaimPacked, cat(packString(nil, "n1"), []byte{1}, binary.AppendVarint(nil, time.Time{}.Unix()), []byte{0, 0, 0}), "zero time"},
		"nanoseconds":           {CmdClaimPacked, cat(packString(nil, "n1"), []byte{1, 0}, binary.AppendUvarint(nil, uint64(time.Second)), []byte{0, 0}), "nanoseconds"},
	} {
		f := NewFSM()
		err := stopOf(t, f, 1, append([]byte{byte(tc.t), 1}, tc.body...))
		require.ErrorIs(t, err, ErrUnreadableCommand, name)
		require.Contains(t, err.Error(), "the body does not decode: ", name)
		require.Contains(t, err.Error(), tc.want, name)
	}
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func unpackAny(t byte, body []byte) error {
	var err error
	switch CommandType(t) {
	case CmdAddDeliveriesPacked:
		_, err = unpackAddDeliveries(body)
	case CmdClaimPacked:
		_, err = UnpackClaim(body)
	case CmdRecordResultsPacked:
		_, err = unpackRecordResults(body)
	default:
		err = fmt.Errorf("not packed: %d", t)
	}
	return err
}

// FuzzPackedBodies: no input makes a decoder panic, and what decodes
// encodes back to a body that decodes to the same value.
func FuzzPackedBodies(f *testing.F) {
	add, claim, res := packedSample()
	for _, c := range []struct {
		t    CommandType
		body any
	}{{CmdAddDeliveries, add}, {CmdClaim, claim}, {CmdRecordResults, res}} {
		cmd, err := EncodeFor(c.t, c.body, FSMVersion)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(cmd[0], cmd[2:])
	}
	f.Fuzz(func(t *testing.T, ct byte, body []byte) {
		var again []byte
		switch CommandType(ct) {
		case CmdAddDeliveriesPacked:
			c, err := unpackAddDeliveries(body)
			if err != nil {
				return
			}
			again = packAddDeliveries(nil, c)
			c2, err := unpackAddDeliveries(again)
			require.NoError(t, err)
			require.Equal(t, c, c2)
		case CmdClaimPacked:
			c, err := UnpackClaim(body)
			if err != nil {
				return
			}
			again = packClaim(nil, c)
			c2, err := UnpackClaim(again)
			require.NoError(t, err)
			require.Equal(t, c, c2)
		case CmdRecordResultsPacked:
			c, err := unpackRecordResults(body)
			if err != nil {
				return
			}
			again = packRecordResults(nil, c)
			c2, err := unpackRecordResults(again)
			require.NoError(t, err)
			require.Equal(t, c, c2)
		}
	})
}

// BenchmarkCodec encodes and decodes (as Apply does) the bodies of a burst
// as JSON and packed: a 500-delivery AddDeliveries chunk, a 1,000-id Claim
// and its 1,000 results.
func BenchmarkCodec(b *testing.B) {
	key := RunKey("daily", t0)
	p := json.RawMessage(`{"msgtype":"text","content":"daily@2026-12-01T01:00:00Z"}`)
	add := AddDeliveries{RunKey: key}
	for i := range 500 {
		r := fmt.Sprintf("user%06d", i)
		add.Deliveries = append(add.Deliveries, NewDelivery{ID: DeliveryID(key, r), Recipient: r, Channel: "mock", Payload: p,
			Priority: heraldtype.PriorityNormal, NotBefore: t0, Deadline: t0.Add(2 * time.Hour)})
	}
	claim := ClaimDeliveries{Leader: "n1", Now: t0, Timeout: 30 * time.Second}
	res := RecordResults{Leader: "n1", Now: t0}
	for i := range 1000 {
		id := DeliveryID(key, fmt.Sprintf("user%06d", i))
		claim.IDs = append(claim.IDs, id)
		res.Results = append(res.Results, Settlement{ID: id, Seq: 1, Status: heraldtype.StatusSent})
	}
	for _, c := range []struct {
		name string
		t    CommandType
		body any
	}{{"AddDeliveries500", CmdAddDeliveries, add}, {"Claim1000", CmdClaim, claim}, {"RecordResults1000", CmdRecordResults, res}} {
		for _, oldest := range []uint16{1, FSMVersion} {
			form := map[uint16]string{1: "json", FSMVersion: "packed"}[oldest]
			cmd, err := EncodeFor(c.t, c.body, oldest)
			require.NoError(b, err)
			b.Run(c.name+"/"+form+"/encode", func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(cmd)))
				for b.Loop() {
					if _, err := EncodeFor(c.t, c.body, oldest); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(c.name+"/"+form+"/decode", func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(cmd)))
				for b.Loop() {
					if err := decodeAny(cmd); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// decodeAny decodes cmd's body as Apply would.
func decodeAny(cmd []byte) error {
	v, body := cmd[1], cmd[2:]
	var err error
	switch CommandType(cmd[0]) {
	case CmdAddDeliveries:
		_, err = decodeBody[AddDeliveries](v, body)
	case CmdClaim:
		_, err = decodeBody[ClaimDeliveries](v, body)
	case CmdRecordResults:
		_, err = decodeBody[RecordResults](v, body)
	default:
		err = unpackAny(cmd[0], body)
	}
	return err
}

// TestPackedBusyLogAsJSON: the snapshot workload (every transition, alerts,
// tasks, pruning) applied with packed bodies is the state it is with JSON
// ones, byte for byte; and a snapshot of the packed state persisted while
// Apply goes on is the state at its index (run with -race: the deliveries
// of a packed chunk share their payload and retry list).
func TestPackedBusyLogAsJSON(t *testing.T) {
	t.Parallel()
	js := setupFSM(t)
	packed := setupFSM(t)
	packed.packed = true
	for r := range 12 {
		busyLog(js, r)
		busyLog(packed, r)
	}
	snap := func(b *fsmBundle) Snapshot {
		s, err := b.fsm.Snapshot()
		require.NoError(t, err)
		return s
	}
	want := persist(t, snap(js))
	during := snap(packed)
	done := make(chan []byte)
	go func() {
		var buf bytes.Buffer
		_ = during.Persist(&buf) // checked below
		done <- buf.Bytes()
	}()
	for r := 12; r < 30; r++ {
		busyLog(packed, r)
	}
	require.Equal(t, string(want), string(<-done), "packed, persisted while Apply went on")
	for r := 12; r < 30; r++ {
		busyLog(js, r)
	}
	require.Equal(t, string(persist(t, snap(js))), string(persist(t, snap(packed))))
}
