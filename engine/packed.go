package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// This file holds the packed (binary) bodies of the three commands a burst
// is made of: AddDeliveries, Claim and RecordResults. Each is a command
// type of its own (CmdAddDeliveriesPacked…), meaning exactly what its JSON
// twin means and applied by the same code; the leader writes it once every
// member applies FSM version 2 (EncodeFor), and every build keeps reading
// the JSON ones in older logs. Packed bodies are a quarter of the bytes and
// decode without reflection, on every node. See "The replicated log" in
// engine/DESIGN.md for the layouts.
//
// Decoding is strict, as for JSON bodies: a truncated body, trailing bytes,
// an unknown flag or status, a varint that overflows are errors (the node
// stops clearly), never panics and never guesses.

// JSONTwin is the JSON command whose packed twin t is, or t itself if t
// is not a packed command. Tests outside the package (a replicator that
// fails a command type) use it to treat a packed twin as its JSON command.
func JSONTwin(t CommandType) CommandType {
	for json, packed := range packedOf {
		if t == packed {
			return json
		}
	}
	return t
}

// PackedTwin is the packed twin of JSON command t, if it has one. Tests
// outside the package (which commands a leader wrote packed) use it.
func PackedTwin(t CommandType) (CommandType, bool) {
	p, ok := packedOf[t]
	return p, ok
}

// packedOf maps a JSON command to its packed twin.
var packedOf = map[CommandType]CommandType{
	CmdAddDeliveries: CmdAddDeliveriesPacked,
	CmdClaim:         CmdClaimPacked,
	CmdRecordResults: CmdRecordResultsPacked,
}

// EncodeFor encodes a command for a cluster whose oldest member applies
// FSM version oldest: packed when t has a packed twin every member reads,
// else as Encode does.
func EncodeFor(t CommandType, body any, oldest uint16) ([]byte, error) {
	p, ok := packedOf[t]
	if !ok || commandSpecs[p].since[0] > oldest {
		return Encode(t, body)
	}
	head := []byte{byte(p), commandSpecs[p].latest()}
	// Sized for the usual body (hex ids, repeated fields) in one go.
	switch b := body.(type) {
	case AddDeliveries:
		return packAddDeliveries(append(make([]byte, 0, 64+48*len(b.Deliveries)), head...), b), nil
	case ClaimDeliveries:
		return packClaim(append(make([]byte, 0, 64+17*len(b.IDs)), head...), b), nil
	case RecordResults:
		return packRecordResults(append(make([]byte, 0, 64+24*len(b.Results)), head...), b), nil
	}
	return nil, fmt.Errorf("encode %s: body is a %T", t, body)
}

// Flags of a packed delivery: which fields repeat the previous delivery's
// (a chunk of a run mostly shares channel, payload, times and retries).
const (
	sameChannel uint8 = 1 << iota
	samePayload
	samePriority
	sameNotBefore
	sameDeadline
	sameRetry
	sameAll = sameChannel | samePayload | samePriority | sameNotBefore | sameDeadline | sameRetry
)

// packAddDeliveries: run key, count, then per delivery: id, recipient,
// flags, and each field its flag does not say repeats.
func packAddDeliveries(w []byte, c AddDeliveries) []byte {
	w = packString(w, c.RunKey)
	w = binary.AppendUvarint(w, uint64(len(c.Deliveries)))
	for i, d := range c.Deliveries {
		w = packID(w, d.ID)
		w = packString(w, d.Recipient)
		var flags uint8
		if i > 0 {
			p := c.Deliveries[i-1]
			flags = boolFlag(d.Channel == p.Channel, sameChannel) |
				boolFlag(bytes.Equal(d.Payload, p.Payload) && len(d.Payload) > 0, samePayload) |
				boolFlag(d.Priority == p.Priority, samePriority) |
				boolFlag(sameInstant(d.NotBefore, p.NotBefore), sameNotBefore) |
				boolFlag(sameInstant(d.Deadline, p.Deadline), sameDeadline) |
				boolFlag(sameRetries(d.Retry, p.Retry), sameRetry)
		}
		w = append(w, flags)
		if flags&sameChannel == 0 {
			w = packString(w, d.Channel)
		}
		if flags&samePayload == 0 {
			w = packPayload(w, d.Payload)
		}
		if flags&samePriority == 0 {
			w = binary.AppendUvarint(w, uint64(d.Priority))
		}
		if flags&sameNotBefore == 0 {
			w = packTime(w, d.NotBefore)
		}
		if flags&sameDeadline == 0 {
			w = packTime(w, d.Deadline)
		}
		if flags&sameRetry == 0 {
			w = packRetry(w, d.Retry)
		}
	}
	return w
}

func unpackAddDeliveries(b []byte) (AddDeliveries, error) {
	r := packReader{b: b}
	c := AddDeliveries{RunKey: r.string()}
	n := r.count(3)
	if n > 0 {
		c.Deliveries = make([]NewDelivery, n)
	}
	for i := range n {
		d := &c.Deliveries[i]
		d.ID = r.id()
		d.Recipient = r.string()
		flags := r.byte()
		if flags&^sameAll != 0 {
			r.fail(fmt.Errorf("delivery %d: unknown flags %#x", i, flags))
		}
		if i == 0 && flags != 0 {
			r.fail(errors.New("the first delivery repeats a field of none"))
		}
		if r.err != nil {
			break
		}
		if flags&sameChannel != 0 {
			d.Channel = c.Deliveries[i-1].Channel
		} else {
			d.Channel = r.string()
		}
		if flags&samePayload != 0 {
			d.Payload = c.Deliveries[i-1].Payload // shared: records are never mutated
		} else {
			if d.Payload = r.bytes(); r.err == nil && len(d.Payload) == 0 {
				r.fail(errors.New("an empty payload (none is written null)"))
			}
		}
		if flags&samePriority != 0 {
			d.Priority = c.Deliveries[i-1].Priority
		} else {
			d.Priority = heraldtype.Priority(r.small(math.MaxUint8))
		}
		if flags&sameNotBefore != 0 {
			d.NotBefore = c.Deliveries[i-1].NotBefore
		} else {
			d.NotBefore = r.time()
		}
		if flags&sameDeadline != 0 {
			d.Deadline = c.Deliveries[i-1].Deadline
		} else {
			d.Deadline = r.time()
		}
		if flags&sameRetry != 0 {
			d.Retry = c.Deliveries[i-1].Retry // shared, as the payload
		} else {
			d.Retry = r.retry()
		}
	}
	return c, r.done()
}

// packClaim: leader, now, timeout, count, ids.
func packClaim(w []byte, c ClaimDeliveries) []byte {
	w = packString(w, c.Leader)
	w = packTime(w, c.Now)
	w = binary.AppendVarint(w, int64(c.Timeout))
	w = binary.AppendUvarint(w, uint64(len(c.IDs)))
	for _, id := range c.IDs {
		w = packID(w, id)
	}
	return w
}

// UnpackClaim decodes a packed claim's body (a CmdClaimPacked command past
// its type and version bytes). Exported for the leader's tests, whose
// replicator records which deliveries each claim took.
func UnpackClaim(b []byte) (ClaimDeliveries, error) {
	r := packReader{b: b}
	c := ClaimDeliveries{Leader: r.string(), Now: r.time(), Timeout: time.Duration(r.varint())}
	n := r.count(1)
	if n > 0 {
		c.IDs = make([]string, n)
	}
	for i := range n {
		c.IDs[i] = r.id()
	}
	return c, r.done()
}

// Flags of a packed result: which optional fields follow.
const (
	hasProviderID uint8 = 1 << iota
	hasRetryAfter
	hasCode
	hasError
	hasAll = hasProviderID | hasRetryAfter | hasCode | hasError
)

// packRecordResults: leader, now, count, then per result: id, seq, status,
// flags, and the optional fields the flags name.
func packRecordResults(w []byte, c RecordResults) []byte {
	w = packString(w, c.Leader)
	w = packTime(w, c.Now)
	w = binary.AppendUvarint(w, uint64(len(c.Results)))
	for _, r := range c.Results {
		w = packID(w, r.ID)
		w = binary.AppendUvarint(w, uint64(r.Seq))
		w = append(w, byte(r.Status))
		flags := boolFlag(r.ProviderID != "", hasProviderID) | boolFlag(r.RetryAfter != 0, hasRetryAfter) |
			boolFlag(r.Code != "", hasCode) | boolFlag(r.Error != "", hasError)
		w = append(w, flags)
		if flags&hasProviderID != 0 {
			w = packString(w, r.ProviderID)
		}
		if flags&hasRetryAfter != 0 {
			w = binary.AppendVarint(w, int64(r.RetryAfter))
		}
		if flags&hasCode != 0 {
			w = packString(w, r.Code)
		}
		if flags&hasError != 0 {
			w = packString(w, r.Error)
		}
	}
	return w
}

func unpackRecordResults(b []byte) (RecordResults, error) {
	r := packReader{b: b}
	c := RecordResults{Leader: r.string(), Now: r.time()}
	n := r.count(4)
	if n > 0 {
		c.Results = make([]Settlement, n)
	}
	for i := range n {
		res := &c.Results[i]
		res.ID = r.id()
		res.Seq = int(r.small(math.MaxInt32))
		res.Status = heraldtype.Status(r.byte())
		if r.err == nil && !res.Status.Known() {
			r.fail(fmt.Errorf("result %d: unknown status %d", i, res.Status))
		}
		flags := r.byte()
		if flags&^hasAll != 0 {
			r.fail(fmt.Errorf("result %d: unknown flags %#x", i, flags))
		}
		if r.err != nil {
			break
		}
		// A flag that is set names a field that is not empty: one way to
		// write each body.
		if flags&hasProviderID != 0 {
			res.ProviderID = r.nonEmpty()
		}
		if flags&hasRetryAfter != 0 {
			if res.RetryAfter = time.Duration(r.varint()); res.RetryAfter == 0 {
				r.fail(errors.New("retry_after flagged but zero"))
			}
		}
		if flags&hasCode != 0 {
			res.Code = r.nonEmpty()
		}
		if flags&hasError != 0 {
			res.Error = r.nonEmpty()
		}
	}
	return c, r.done()
}

func boolFlag(b bool, f uint8) uint8 {
	if b {
		return f
	}
	return 0
}

// sameInstant: the packed form keeps the instant (UTC), not the zone.
func sameInstant(a, b time.Time) bool { return a.Equal(b) }

// sameRetries: nil (the default) and empty (no retry) differ.
func sameRetries(a, b []time.Duration) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}

// packPayload writes a payload; none is written as JSON writes it, null.
func packPayload(w []byte, p []byte) []byte {
	if len(p) == 0 {
		p = []byte("null")
	}
	w = binary.AppendUvarint(w, uint64(len(p)))
	return append(w, p...)
}

func packString(w []byte, s string) []byte {
	w = binary.AppendUvarint(w, uint64(len(s)))
	return append(w, s...)
}

// packID writes a delivery id: the 32 lowercase hex digits DeliveryID
// makes as 0 and their 16 bytes; any other id as its length plus one and
// its bytes.
func packID(w []byte, id string) []byte {
	if isHexID(id) {
		w = append(w, 0)
		w, _ = hex.AppendDecode(w, []byte(id)) // cannot fail: checked
		return w
	}
	w = binary.AppendUvarint(w, uint64(len(id))+1)
	return append(w, id...)
}

func isHexID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// packTime writes 0 for the zero time, else 1, the Unix seconds and the
// nanoseconds. The zone is not kept: Apply reads instants, in UTC.
func packTime(w []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(w, 0)
	}
	w = append(w, 1)
	w = binary.AppendVarint(w, t.Unix())
	return binary.AppendUvarint(w, uint64(t.Nanosecond()))
}

// packRetry writes 0 for no list (the default), else the count plus one
// and the waits: an empty list (do not retry) is 1.
func packRetry(w []byte, waits []time.Duration) []byte {
	if waits == nil {
		return append(w, 0)
	}
	w = binary.AppendUvarint(w, uint64(len(waits))+1)
	for _, d := range waits {
		w = binary.AppendVarint(w, int64(d))
	}
	return w
}

// packReader reads a packed body. The first error sticks: later reads
// return zero values, and done reports it.
type packReader struct {
	b   []byte
	err error
}

func (r *packReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *packReader) done() error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d bytes after the body", len(r.b))
	}
	return r.err
}

func (r *packReader) byte() uint8 {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail(errors.New("truncated body"))
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *packReader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }

func (r *packReader) varint() int64 { return readVarint(r, binary.Varint) }

// readVarint reads one varint with decode (binary.Uvarint or Varint), so
// that both say alike what a bad varint is.
func readVarint[T uint64 | int64](r *packReader, decode func([]byte) (T, int)) T {
	if r.err != nil {
		return 0
	}
	v, n := decode(r.b)
	if n <= 0 {
		r.fail(errors.New("truncated or overlong varint"))
		return 0
	}
	r.b = r.b[n:]
	return v
}

// small reads an unsigned varint of at most limit.
func (r *packReader) small(limit uint64) uint64 {
	v := r.uvarint()
	if v > limit {
		r.fail(fmt.Errorf("value %d out of range", v))
		return 0
	}
	return v
}

// count reads an element count; each element takes at least min bytes, so
// a count the rest of the body cannot hold is an error (not a huge
// allocation).
func (r *packReader) count(min int) int {
	v := r.uvarint()
	if r.err == nil && v > uint64(len(r.b)/min) {
		r.fail(fmt.Errorf("count %d does not fit in the %d bytes left", v, len(r.b)))
		return 0
	}
	return int(v)
}

func (r *packReader) take(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(errors.New("truncated body"))
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *packReader) string() string { return string(r.take(r.uvarint())) }

func (r *packReader) nonEmpty() string {
	s := r.string()
	if r.err == nil && s == "" {
		r.fail(errors.New("an optional field is flagged but empty"))
	}
	return s
}

// bytes copies: the command's buffer is not the state's to keep.
func (r *packReader) bytes() []byte {
	b := r.take(r.uvarint())
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

func (r *packReader) id() string {
	n := r.uvarint()
	if n > 0 {
		id := string(r.take(n - 1))
		if isHexID(id) {
			r.fail(errors.New("a hex id written long"))
		}
		return id
	}
	raw := r.take(16)
	if raw == nil {
		return ""
	}
	return hex.EncodeToString(raw)
}

func (r *packReader) time() time.Time {
	switch r.byte() {
	case 0:
		return time.Time{}
	case 1:
		sec, nsec := r.varint(), r.uvarint()
		if nsec >= uint64(time.Second) {
			r.fail(fmt.Errorf("nanoseconds %d out of range", nsec))
		}
		if r.err != nil {
			return time.Time{}
		}
		t := time.Unix(sec, int64(nsec)).UTC()
		if t.IsZero() {
			r.fail(errors.New("the zero time written as an instant"))
		}
		return t
	default:
		r.fail(errors.New("unknown time form"))
		return time.Time{}
	}
}

func (r *packReader) retry() []time.Duration {
	n := r.uvarint()
	if n == 0 || r.err != nil {
		return nil
	}
	n--
	if n > uint64(len(r.b)) {
		r.fail(fmt.Errorf("count %d does not fit in the %d bytes left", n, len(r.b)))
		return nil
	}
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(r.varint())
	}
	return out
}
