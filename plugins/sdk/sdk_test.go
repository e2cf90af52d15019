package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	channelv1 "github.com/heraldhq/herald/plugins/proto/channel/v1"
	"github.com/heraldhq/herald/plugins/sdk"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a channel that records what it was given and answers as told.
type fake struct {
	configured json.RawMessage
	got        []sdk.Message
	results    []sdk.Result
	err        error
	health     error
	block      bool // Send waits for its context
}

func (f *fake) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "fake", Version: "0.1", Limits: []sdk.Limit{
		{Scope: sdk.ScopeRecipient, Count: 30, Per: time.Minute},
		{Scope: sdk.ScopeChannel, Count: 20, Per: 1500 * time.Millisecond},
	}}, nil
}

func (f *fake) Configure(_ context.Context, c json.RawMessage) error {
	f.configured = c
	return f.err
}

func (f *fake) Send(ctx context.Context, b []sdk.Message) ([]sdk.Result, error) {
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f.got = b
	return f.results, f.err
}

type healthy struct{ *fake }

func (h healthy) Health(context.Context) error { return h.health }

func connect(t *testing.T, impl sdk.Channel) *sdk.Client {
	conn, srv := plugin.TestGRPCConn(t, func(s *grpc.Server) {
		channelv1.RegisterChannelServer(s, sdk.NewServer(impl))
	})
	t.Cleanup(func() { _ = conn.Close(); srv.Stop() })
	return sdk.NewClient(conn)
}

func TestRoundTripKeepsEveryField(t *testing.T) {
	t.Parallel()
	f := &fake{results: []sdk.Result{
		{ID: "1", Status: sdk.StatusSent, ProviderID: "msg-1"},
		{ID: "2", Status: sdk.StatusRateLimited, RetryAfter: 2500 * time.Millisecond, Code: "45009", Error: "api freq out of limit"},
	}}
	c := connect(t, f)
	ctx := context.Background()

	info, version, err := c.InfoVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, sdk.ProtocolVersion, version)
	want, _ := f.Info(ctx)
	require.Equal(t, want, info)

	require.NoError(t, c.Configure(ctx, json.RawMessage(`{"channel":"x"}`)))
	require.JSONEq(t, `{"channel":"x"}`, string(f.configured))

	batch := []sdk.Message{
		{ID: "1", IdempotencyKey: "k1", Recipient: "alice", Payload: json.RawMessage(`{"a":1}`), Attempt: 1},
		{ID: "2", IdempotencyKey: "k2", Recipient: "bob", Payload: json.RawMessage(`{"b":2}`), Attempt: 3},
	}
	res, err := c.Send(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, f.results, res)
	require.Equal(t, batch, f.got)

	reason, err := c.Health(ctx)
	require.NoError(t, err)
	require.Empty(t, reason, "a channel without HealthChecker is healthy")
}

func TestErrorsCrossTheBoundary(t *testing.T) {
	t.Parallel()
	f := &fake{err: errors.New("corp_id is required")}
	c := connect(t, f)
	err := c.Configure(context.Background(), json.RawMessage(`{}`))
	require.EqualError(t, err, "plugin configure: corp_id is required")
	var rpcErr *sdk.RPCError
	require.ErrorAs(t, err, &rpcErr)
	require.Equal(t, "configure", rpcErr.RPC)

	_, err = c.Send(context.Background(), nil)
	require.EqualError(t, err, "plugin send: corp_id is required")
}

func TestCancellationCrossesTheBoundary(t *testing.T) {
	t.Parallel()
	c := connect(t, &fake{block: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := c.Send(ctx, []sdk.Message{{ID: "1"}})
		done <- err
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, err := c.Send(ctx, []sdk.Message{{ID: "1"}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestHealthChecker(t *testing.T) {
	t.Parallel()
	h := healthy{&fake{health: errors.New("access token expired")}}
	c := connect(t, h)
	reason, err := c.Health(context.Background())
	require.NoError(t, err)
	require.Equal(t, "access token expired", reason)
}

func TestLoggerWritesHCLogJSON(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	sdk.NewLoggerTo(&buf).Warn("token refresh failed", "attempt", 2)
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	require.Equal(t, "warn", line["@level"])
	require.Equal(t, "token refresh failed", line["@message"])
	require.EqualValues(t, 2, line["attempt"])
	_, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", line["@timestamp"].(string))
	require.NoError(t, err, "go-plugin parses exactly this layout")
}

// limits is a channel that declares the limits it is given.
type limits struct {
	fake
	l []sdk.Limit
}

func (c *limits) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "limits", Limits: c.l}, nil
}

// rawInfo answers Info with a fixed protocol message.
type rawInfo struct {
	channelv1.UnimplementedChannelServer
	resp *channelv1.InfoResponse
}

func (r rawInfo) Info(context.Context, *channelv1.InfoRequest) (*channelv1.InfoResponse, error) {
	return r.resp, nil
}

func TestLimitsNeverLoosenOnTheWire(t *testing.T) {
	t.Parallel()
	// Per crosses as whole milliseconds. Cutting 1.5ms to 1ms would let
	// Count through every millisecond instead of every 1.5.
	c := connect(t, &limits{l: []sdk.Limit{
		{Scope: sdk.ScopeChannel, Count: 3, Per: 1500 * time.Microsecond},
		{Scope: sdk.ScopeChannel, Count: 3, Per: time.Nanosecond},
		{Scope: sdk.ScopeChannel, Count: 3, Per: time.Minute},
	}})
	info, err := c.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, []time.Duration{2 * time.Millisecond, time.Millisecond, time.Minute},
		[]time.Duration{info.Limits[0].Per, info.Limits[1].Per, info.Limits[2].Per})

	// A per_ms too large for a Duration must not wrap around to a short
	// window (or a negative one).
	conn, srv := plugin.TestGRPCConn(t, func(s *grpc.Server) {
		channelv1.RegisterChannelServer(s, rawInfo{resp: &channelv1.InfoResponse{Name: "raw", ProtocolVersion: sdk.ProtocolVersion,
			Limits: []*channelv1.Limit{{Scope: "channel", Count: 1, PerMs: 1 << 62}}}})
	})
	t.Cleanup(func() { _ = conn.Close(); srv.Stop() })
	info, err = sdk.NewClient(conn).Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, time.Duration(math.MaxInt64), info.Limits[0].Per)
}
