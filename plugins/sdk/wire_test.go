package sdk

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	channelv1 "github.com/heraldhq/herald/plugins/proto/channel/v1"
)

// A status the protocol does not know stays unknown on the host's side,
// whatever its number: Status is a byte, the wire's an int32, and 257 must
// not wrap around into StatusSent.
func TestUnknownWireStatusStaysUnknown(t *testing.T) {
	t.Parallel()
	for _, s := range []channelv1.Status{0, 6, 255, 256, 257, 259, math.MaxInt32, -1, math.MinInt32} {
		require.False(t, resultFromWire(&channelv1.Result{Id: "a", Status: s}).Status.Known(), "wire status %d", s)
	}
	for _, s := range []Status{StatusSent, StatusRetryable, StatusRateLimited, StatusPermanent, StatusConfig} {
		require.Equal(t, s, resultFromWire(resultToWire(Result{ID: "a", Status: s})).Status)
	}
}

// SendSize is what gRPC measures against its limit: the request's encoded
// size, multi-byte payloads and long length prefixes included.
func TestSendSizeIsTheRequestsEncodedSize(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, 1 << 20, MaxSendBytes} {
		batch := []Message{
			{ID: "a", IdempotencyKey: "k", Recipient: "张三", Payload: []byte(strings.Repeat("汉", n/3)), Attempt: 3},
			{ID: "b"},
		}
		req := &channelv1.SendRequest{}
		for _, m := range batch {
			req.Batch = append(req.Batch, messageToWire(m))
		}
		require.Equal(t, proto.Size(req), SendSize(batch), "payload %d bytes", n)
	}
	require.Zero(t, SendSize(nil))
}

// The plugin's side of a call ends it at the deadline the host sent along,
// and its reset can reach the host before the host's own timer fires:
// gRPC's DeadlineExceeded while ctx.Err() is still nil. It is the caller's
// deadline all the same (the plugin's own deadline errors cross as
// Unknown), and errors.Is must say so; it used to come back as a plain
// RPCError, which the host reported as the channel failing the batch.
func TestDeadlineFromThePluginSideIsTheCallers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	err := fromStatus(ctx, "send", status.Error(codes.DeadlineExceeded, "stream terminated by RST_STREAM with error code: CANCEL"))
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// Without a deadline of the caller's, it is the plugin's answer.
	err = fromStatus(context.Background(), "send", status.Error(codes.DeadlineExceeded, "upstream"))
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	var rpcErr *RPCError
	require.ErrorAs(t, err, &rpcErr)
}
