package host

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stopPlugin freezes channel's plugin with SIGSTOP, as a process stuck in
// the kernel or wedged by its own runtime would be: it keeps its socket
// but answers nothing. It returns the pid, and makes sure the process does
// not outlive the test even when the host under test fails to stop it.
func stopPlugin(t *testing.T, h *Host, channel string) int {
	t.Helper()
	pid := h.Pid(channel)
	require.NotZero(t, pid)
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	// Runs before the host's Close (cleanups run last first): a host that
	// cannot stop the frozen plugin must still let the test end.
	t.Cleanup(func() {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

func TestStuckPluginIsKilledAndRestarted(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]ChannelConfig{"m": mockChannel(nil)}, func(c *Config) {
		c.StartTimeout = 2 * time.Second
	})
	pid := stopPlugin(t, b.h, "m")

	// The Health RPC times out; the frozen process is killed and another
	// one serves.
	eventually(t, func() bool { st := statusOf(b.h, "m"); return st.Healthy && st.Restarts == 1 }, "restarted after its health check failed")
	require.NotEqual(t, pid, b.h.Pid("m"))
	eventually(t, func() bool { return !alive(pid) }, "the frozen plugin was killed")

	batch := outgoing(2, "after")
	out, err := b.h.Send(context.Background(), "m", batch)
	require.NoError(t, err)
	requireAllSent(t, batch, out)
}

func TestCloseStopsAStuckPlugin(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]ChannelConfig{"m": mockChannel(nil)}, func(c *Config) {
		c.StartTimeout = time.Second
		c.HealthInterval = time.Hour // Close, not the health check, must deal with it
	})
	pid := stopPlugin(t, b.h, "m")

	closed := make(chan struct{})
	go func() {
		_ = b.h.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("Close hangs on a plugin that does not answer")
	}
	require.False(t, alive(pid), "no plugin process survives Close")
}
