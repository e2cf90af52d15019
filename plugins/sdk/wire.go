package sdk

import (
	"math"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	channelv1 "github.com/heraldhq/herald/plugins/proto/channel/v1"
)

// The one place where the channel protocol's generated types and Herald's
// delivery values meet: the host's client and the plugin's server convert
// through these, in both directions.

func messageToWire(m Message) *channelv1.Message {
	return &channelv1.Message{
		Id:             m.ID,
		IdempotencyKey: m.IdempotencyKey,
		Recipient:      m.Recipient,
		Payload:        m.Payload,
		Attempt:        int32(m.Attempt),
	}
}

func messageFromWire(m *channelv1.Message) Message {
	return Message{
		ID:             m.GetId(),
		IdempotencyKey: m.GetIdempotencyKey(),
		Recipient:      m.GetRecipient(),
		Payload:        m.GetPayload(),
		Attempt:        int(m.GetAttempt()),
	}
}

func resultToWire(r Result) *channelv1.Result {
	return &channelv1.Result{
		Id:           r.ID,
		Status:       channelv1.Status(r.Status),
		ProviderId:   r.ProviderID,
		RetryAfterMs: msCeil(r.RetryAfter),
		Code:         r.Code,
		Error:        r.Error,
	}
}

func resultFromWire(r *channelv1.Result) Result {
	return Result{
		ID:         r.GetId(),
		Status:     statusFromWire(r.GetStatus()),
		ProviderID: r.GetProviderId(),
		RetryAfter: durationOfMs(r.GetRetryAfterMs()),
		Code:       r.GetCode(),
		Error:      r.GetError(),
	}
}

// statusFromWire keeps a status the protocol does not know unknown: the
// wire's int32 would otherwise wrap into a verdict (257 into StatusSent),
// where the host must see a bad answer.
func statusFromWire(s channelv1.Status) Status {
	if s < 0 || s > math.MaxUint8 {
		return 0
	}
	return Status(s)
}

func limitToWire(l Limit) *channelv1.Limit {
	return &channelv1.Limit{Scope: string(l.Scope), Count: int64(l.Count), PerMs: msCeil(l.Per)}
}

func limitFromWire(l *channelv1.Limit) Limit {
	return Limit{Scope: LimitScope(l.GetScope()), Count: int(l.GetCount()), Per: durationOfMs(l.GetPerMs())}
}

// msCeil is d in whole milliseconds, rounded up: a limit's window and a
// wait cross the wire in milliseconds, and a shorter window would let more
// through.
func msCeil(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d > time.Duration(ms)*time.Millisecond {
		ms++
	}
	return ms
}

// durationOfMs is ms milliseconds, saturating instead of wrapping around
// for what a Duration cannot hold.
func durationOfMs(ms int64) time.Duration {
	switch {
	case ms > math.MaxInt64/int64(time.Millisecond):
		return math.MaxInt64
	case ms < math.MinInt64/int64(time.Millisecond):
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// MaxSendBytes is the largest Send request the protocol carries: gRPC's
// default receive limit, which every plugin's server has unless its author
// raised it. A bigger request fails whole at the plugin ("received message
// larger than max"), so the host sends a batch over it in parts and refuses
// a message that cannot fit alone (see SendSize).
const MaxSendBytes = 4 << 20

// SendSize is the encoded size of the Send request holding batch, which
// MaxSendBytes bounds. It is the sum of its messages' sizes: a request is
// its messages and nothing else.
func SendSize(batch []Message) int {
	n := 0
	for _, m := range batch {
		s := proto.Size(messageToWire(m))
		n += protowire.SizeTag(1) + protowire.SizeBytes(s)
	}
	return n
}
