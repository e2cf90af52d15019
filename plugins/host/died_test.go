package host

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

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
