package host

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
)

// cancels is a channel whose Send fails with a context.Canceled of its
// own (an upstream call it gave up on), while the host's call goes on.
type cancels struct{}

func (cancels) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "cancels", Version: "1"}, nil
}

func (cancels) Configure(context.Context, json.RawMessage) error { return nil }

func (cancels) Send(context.Context, []sdk.Message) ([]sdk.Result, error) {
	return nil, fmt.Errorf("upstream call: %w", context.Canceled)
}

// A plugin that answers a Send with an error is alive, whatever the error
// wraps. One wrapping context.Canceled used to cross the wire as gRPC's
// Canceled, which the host reads as the plugin dying under the call: it
// killed the healthy process, restarted it and sent the batch a second
// time. Only the caller's own cancellation crosses as Canceled now.
func TestPluginsOwnCancelIsNotItsDeath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	linkPlugin(t, dir, "cancels")
	b := setup(t, map[string]ChannelConfig{"c": {Plugin: "cancels"}},
		func(c *Config) { c.PluginsDir, c.PluginSHA256 = dir, allowAll(t, dir) })
	pid := b.h.Pid("c")
	_, err := b.h.Send(context.Background(), "c", outgoing(3, "cancels"))
	require.ErrorIs(t, err, ErrSendFailed)
	require.ErrorContains(t, err, "upstream call: context canceled")
	require.NotContains(t, b.logs.String(), "died during a send")
	require.Equal(t, pid, b.h.Pid("c"), "the plugin was not replaced")
	require.Zero(t, statusOf(b.h, "c").Restarts)
}

// hangs is a channel whose Send never returns, cancelled or not (a
// deadlock in its send path), while the process answers everything else.
type hangs struct{}

func (hangs) Info(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "hangs", Version: "1"}, nil
}

func (hangs) Configure(context.Context, json.RawMessage) error { return nil }

func (hangs) Send(context.Context, []sdk.Message) ([]sdk.Result, error) {
	select {}
}

// A plugin stuck in Send but still answering Health used to stay: every
// batch after the first hung until its claim ran out, and the channel
// showed healthy. A Send that goes on StartTimeout after its call was
// cancelled makes the plugin's Health fail, so the host restarts it.
func TestSendStuckPastCancelRestartsThePlugin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	linkPlugin(t, dir, "hangs")
	b := setup(t, map[string]ChannelConfig{"h": {Plugin: "hangs"}}, func(c *Config) {
		c.PluginsDir, c.PluginSHA256 = dir, allowAll(t, dir)
		c.StartTimeout = time.Second
	})
	pid := b.h.Pid("h")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := b.h.Send(ctx, "h", outgoing(2, "hangs"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	eventually(t, func() bool { st := statusOf(b.h, "h"); return st.Restarts == 1 && st.Healthy }, "the stuck plugin restarted")
	require.NotEqual(t, pid, b.h.Pid("h"))
	require.Contains(t, b.logs.String(), "still running")
}

// The caller's deadline seen from the plugin's side first (the sdk client
// returns context.DeadlineExceeded while ctx.Err() is still nil: the
// plugin's reset beat this side's timer) stays recognisable through Send.
// It came out as ErrSendFailed with the deadline only in its text, so the
// caller took its own deadline for the channel failing the batch.
func TestCallersDeadlineSeenFirstByThePluginStaysADeadline(t *testing.T) {
	t.Parallel()
	in := &instance{name: "c", redact: func(s string) string { return s }}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour) // not yet fired on this side
	defer cancel()
	err := in.sendErr(ctx, fmt.Errorf("plugin Send: %w", context.DeadlineExceeded))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "channel c")
}
