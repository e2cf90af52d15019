package sdk

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

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
