package host

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestChannelHealthyMetric(t *testing.T) {
	t.Parallel()
	h, err := New(Config{
		Channels:       map[string]ChannelConfig{"m": {Plugin: "mock", Config: map[string]any{"outbox": filepath.Join(t.TempDir(), "o.jsonl")}}},
		BuiltinCmdFunc: selfCmd,
	})
	require.NoError(t, err)
	want := func(v string) string {
		return "# HELP herald_channel_healthy 1 while the channel's plugin runs and answers its health checks, 0 while it is down or misconfigured.\n" +
			"# TYPE herald_channel_healthy gauge\n" + `herald_channel_healthy{channel="m",plugin="mock"} ` + v + "\n"
	}
	require.NoError(t, testutil.CollectAndCompare(h.Collector(), strings.NewReader(want("0"))), "not started: not healthy")
	require.NoError(t, h.Start(context.Background()))
	t.Cleanup(func() { _ = h.Close() })
	require.NoError(t, testutil.CollectAndCompare(h.Collector(), strings.NewReader(want("1"))))
}
