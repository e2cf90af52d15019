package host

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/plugins/builtin"
	"github.com/heraldhq/herald/plugins/mock"
)

func outgoing(n int, prefix string) []heraldtype.Message {
	out := make([]heraldtype.Message, n)
	for i := range out {
		out[i] = heraldtype.Message{
			ID:             fmt.Sprintf("%s-id-%d", prefix, i),
			IdempotencyKey: fmt.Sprintf("%s-key-%d", prefix, i),
			Recipient:      fmt.Sprintf("user%d", i),
			Payload:        json.RawMessage(`{"msgtype":"text","content":"hi"}`),
			Attempt:        1,
		}
	}
	return out
}

func mockChannel(extra map[string]any) ChannelConfig {
	cfg := map[string]any{"outbox": "OUTBOX"}
	for k, v := range extra {
		cfg[k] = v
	}
	return ChannelConfig{Plugin: "mock", Config: cfg}
}

func requireAllSent(t *testing.T, batch []heraldtype.Message, out []heraldtype.Result) {
	t.Helper()
	require.Len(t, out, len(batch))
	got := map[string]heraldtype.Result{}
	for _, o := range out {
		got[o.ID] = o
	}
	for _, m := range batch {
		require.Equal(t, heraldtype.StatusSent, got[m.ID].Status, "%s: %+v", m.ID, got[m.ID])
		require.Equal(t, mock.ProviderID(m.IdempotencyKey), got[m.ID].ProviderID)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]ChannelConfig{"m": mockChannel(nil)}, nil)
	require.Equal(t, []heraldtype.ChannelStatus{{Name: "m", Plugin: "mock", Version: mock.Version, Healthy: true}}, b.h.Status())

	batch := outgoing(3, "rt")
	out, err := b.h.Send(context.Background(), "m", batch)
	require.NoError(t, err)
	requireAllSent(t, batch, out)

	recs, err := mock.ReadOutbox(b.outbox("m"))
	require.NoError(t, err)
	require.Len(t, recs, 3)
	require.Equal(t, "m", recs[0].Channel, "the host tells the plugin its instance name")
	require.JSONEq(t, `{"msgtype":"text","content":"hi"}`, string(recs[0].Payload))

	out, err = b.h.Send(context.Background(), "m", nil)
	require.NoError(t, err)
	require.Empty(t, out)

	_, err = b.h.Send(context.Background(), "nope", batch)
	require.ErrorIs(t, err, ErrUnknownChannel)

	// The plugin's own log lines reach the host's logger, tagged.
	eventually(t, func() bool { return strings.Contains(b.logs.String(), "mock configured") }, "plugin log forwarded")
	require.Contains(t, b.logs.String(), "channel=m")
}

func TestCrashMidBatchIsRetriedOnRestartedPlugin(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]ChannelConfig{"m": mockChannel(map[string]any{"crash_after_n": 2})}, nil)
	batch := outgoing(5, "crash")
	out, err := b.h.Send(context.Background(), "m", batch)
	require.NoError(t, err, "the batch is retried on the restarted plugin")
	requireAllSent(t, batch, out)

	recs, err := mock.ReadOutbox(b.outbox("m"))
	require.NoError(t, err)
	delivered := mock.Delivered(recs)
	for _, m := range batch {
		require.Equal(t, 1, delivered[m.IdempotencyKey], "key %s", m.IdempotencyKey)
	}
	require.Len(t, recs, 7, "the two delivered before the crash were received again, as duplicates")
	st := statusOf(b.h, "m")
	require.Equal(t, 1, st.Restarts)
	require.True(t, st.Healthy)
}

func TestKilledPluginIsRestarted(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]ChannelConfig{"m": mockChannel(map[string]any{"send_delay": "200ms"})}, nil)
	in := b.h.instances["m"]
	in.lock()
	pid := in.cur.Pid()
	in.unlock()

	// Kill the plugin while a batch is (most likely) inside it.
	batch := outgoing(3, "kill")
	done := make(chan error, 1)
	var out []heraldtype.Result
	go func() {
		var err error
		out, err = b.h.Send(context.Background(), "m", batch)
		done <- err
	}()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.NoError(t, <-done)
	requireAllSent(t, batch, out)
	recs, err := mock.ReadOutbox(b.outbox("m"))
	require.NoError(t, err)
	require.Len(t, recs, 3, "delivered exactly once, on the restarted plugin")

	eventually(t, func() bool { st := statusOf(b.h, "m"); return st.Healthy && st.Restarts == 1 }, "restarted and healthy")
}

func TestSendHonoursCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]ChannelConfig{"m": mockChannel(map[string]any{"send_delay": "1h"})}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.h.Send(ctx, "m", outgoing(2, "cancel"))
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Send ignored cancellation")
	}
	st := statusOf(b.h, "m")
	require.True(t, st.Healthy)
	require.Zero(t, st.Restarts, "a cancelled send is not a dead plugin")
	_, err := os.Stat(b.outbox("m"))
	if err == nil {
		recs, err := mock.ReadOutbox(b.outbox("m"))
		require.NoError(t, err)
		require.Empty(t, recs)
	}
}

func TestSecretsNeverShown(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-very-secret"
	env := func(name string) (string, bool) {
		if name == "MOCK_SECRET" {
			return secret, true
		}
		return "", false
	}
	b := setup(t, map[string]ChannelConfig{
		"bad":  mockChannel(map[string]any{"secret": "${MOCK_SECRET}", "fail_configure": true}),
		"good": mockChannel(map[string]any{"secret": "${MOCK_SECRET}"}),
	}, func(c *Config) { c.LookupEnvFunc = env })

	bad := statusOf(b.h, "bad")
	require.False(t, bad.Healthy)
	require.Contains(t, bad.Error, "fail_configure")
	require.Contains(t, bad.Error, "[REDACTED]", "the secret was resolved, then hidden")
	require.NotContains(t, bad.Error, secret)
	require.True(t, statusOf(b.h, "good").Healthy)

	_, err := b.h.Send(context.Background(), "bad", outgoing(1, "s"))
	require.ErrorIs(t, err, ErrUnavailable)
	require.NotContains(t, err.Error(), secret)

	eventually(t, func() bool { return strings.Contains(b.logs.String(), "did not start") }, "start failure logged")
	require.NotContains(t, b.logs.String(), secret)
	require.NotContains(t, fmt.Sprint(b.h.Status()), secret)
}

func TestMissingEnvFailsNew(t *testing.T) {
	t.Parallel()
	_, err := New(Config{
		Channels:      map[string]ChannelConfig{"m": {Plugin: "mock", Config: map[string]any{"secret": "${NOT_SET_ANYWHERE}"}}},
		LookupEnvFunc: func(string) (string, bool) { return "", false },
	})
	require.ErrorIs(t, err, ErrMissingEnv)
	require.ErrorContains(t, err, "NOT_SET_ANYWHERE")
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"unknown plugin": {Channels: map[string]ChannelConfig{"m": {Plugin: "carrier-pigeon"}}},
		"no plugin":      {Channels: map[string]ChannelConfig{"m": {}}},
		"reserved key":   {Channels: map[string]ChannelConfig{"m": {Plugin: "mock", Config: map[string]any{"channel": "x"}}}},
		"reserve":        {HighReserve: 1.5},
	} {
		_, err := New(cfg)
		require.Error(t, err, name)
	}
	_, err := New(Config{Channels: map[string]ChannelConfig{"m": {Plugin: "carrier-pigeon"}}})
	require.ErrorIs(t, err, ErrUnknownPlugin)
	require.ErrorContains(t, err, "herald-channel-carrier-pigeon")
}

// linkPlugin drops the test binary into dir as herald-channel-name.
func linkPlugin(t *testing.T, dir, name string) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	path := filepath.Join(dir, ExternalPrefix+name)
	require.NoError(t, os.Symlink(exe, path))
	return path
}

func TestBadPluginsDoNotKillTheHost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	linkPlugin(t, dir, "v2")
	require.NoError(t, os.WriteFile(filepath.Join(dir, ExternalPrefix+"noexec"), []byte("#!/bin/sh\n"), 0o644))
	writeExecutable(t, filepath.Join(dir, ExternalPrefix+"quits"), []byte("#!/bin/sh\necho not a plugin >&2\nexit 1\n"))

	b := setup(t, map[string]ChannelConfig{
		"v2":     {Plugin: "v2"},
		"noexec": {Plugin: "noexec"},
		"quits":  {Plugin: "quits"},
		"m":      mockChannel(nil),
	}, func(c *Config) { c.PluginsDir, c.PluginSHA256 = dir, allowAll(t, dir) })

	require.Contains(t, statusOf(b.h, "v2").Error, "protocol version")
	require.Contains(t, statusOf(b.h, "noexec").Error, "not executable")
	require.Contains(t, statusOf(b.h, "quits").Error, "plugin did not start")
	for _, name := range []string{"v2", "noexec", "quits"} {
		require.False(t, statusOf(b.h, name).Healthy, name)
		_, err := b.h.Send(context.Background(), name, outgoing(1, name))
		require.ErrorIs(t, err, ErrUnavailable, name)
	}
	batch := outgoing(2, "fine")
	out, err := b.h.Send(context.Background(), "m", batch)
	require.NoError(t, err, "the good channel still works")
	requireAllSent(t, batch, out)
}

func TestExternalPlugin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := linkPlugin(t, dir, "ext")
	linkPlugin(t, dir, "mock")

	allowed := allowAll(t, dir)
	list, err := List(context.Background(), Config{PluginsDir: dir, BuiltinCmdFunc: selfCmd, PluginSHA256: allowed})
	require.NoError(t, err)
	byName := map[string]PluginInfo{}
	for _, p := range list {
		byName[p.Name] = p
	}
	require.Equal(t, PluginInfo{Name: "ext", Path: path, Version: mock.Version, SHA256: allowed["ext"], Allowed: true}, byName["ext"])
	require.Equal(t, PluginInfo{Name: "mock", Path: filepath.Join(dir, ExternalPrefix+"mock"), Overrides: true, Version: mock.Version,
		SHA256: allowed["mock"], Allowed: true}, byName["mock"])
	for _, name := range builtin.Names() {
		if name != "mock" {
			require.True(t, byName[name].Builtin, name)
			require.Empty(t, byName[name].Error, name)
		}
	}

	b := setup(t, map[string]ChannelConfig{"e": {Plugin: "ext", Config: map[string]any{"outbox": "OUTBOX"}}},
		func(c *Config) { c.PluginsDir, c.PluginSHA256 = dir, allowed })
	batch := outgoing(2, "ext")
	out, err := b.h.Send(context.Background(), "e", batch)
	require.NoError(t, err)
	requireAllSent(t, batch, out)
}

func TestHostAdmitUsesPluginLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]ChannelConfig{"m": mockChannel(map[string]any{
		"limits": []any{map[string]any{"scope": "recipient", "count": 1, "per": "1h"}},
	})}, nil)
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	require.Zero(t, b.h.Admit("m", "alice", heraldtype.PriorityNormal, now))
	require.Equal(t, time.Hour, b.h.Admit("m", "alice", heraldtype.PriorityNormal, now))
	require.Zero(t, b.h.Admit("m", "bob", heraldtype.PriorityNormal, now))
	require.Zero(t, b.h.Admit("unknown", "alice", heraldtype.PriorityNormal, now), "unknown channels are failed by Send")

	h, err := New(Config{Channels: map[string]ChannelConfig{"m": mockChannel(nil)}})
	require.NoError(t, err)
	require.Equal(t, NotReadyWait, h.Admit("m", "alice", heraldtype.PriorityNormal, now), "limits unknown before start")
	_, err = h.Send(context.Background(), "m", outgoing(1, "early"))
	require.ErrorIs(t, err, ErrUnavailable)
	require.NoError(t, h.Close())
	_, err = h.Send(context.Background(), "m", outgoing(1, "late"))
	require.ErrorIs(t, err, ErrClosed)
}

func TestSIGKILLedHostTakesItsPluginAlong(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envRole+"=host", "GORACE=atexit_sleep_ms=0", "OUTBOX="+filepath.Join(t.TempDir(), "o.jsonl"))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "plugin-pid="), "host said %q", line)
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "plugin-pid=")))
	require.NoError(t, err)
	require.True(t, alive(pid), "plugin runs while its host does")
	t.Cleanup(func() {
		if alive(pid) { // the test failed: don't leave the orphan behind
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	eventually(t, func() bool { return !alive(pid) }, "plugin exits after its host was SIGKILLed")
}

// alive tells whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

func TestPluginEnvHoldsNoSecrets(t *testing.T) {
	// Not parallel: it sets the environment.
	t.Setenv("WECOM_SECRET", "must-not-leak")
	t.Setenv("TZ", "Asia/Shanghai")
	env := strings.Join(pluginEnv(), "\n")
	require.NotContains(t, env, "must-not-leak")
	require.Contains(t, env, "TZ=Asia/Shanghai")
}

// BenchmarkSend measures a batch of 100 through a real mock plugin process
// (one fsync per batch).
func BenchmarkSend(b *testing.B) {
	dir := b.TempDir()
	h, err := New(Config{
		Channels:       map[string]ChannelConfig{"m": {Plugin: "mock", Config: map[string]any{"outbox": filepath.Join(dir, "o.jsonl")}}},
		BuiltinCmdFunc: selfCmd,
	})
	require.NoError(b, err)
	defer h.Close()
	require.NoError(b, h.Start(context.Background()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.Send(context.Background(), "m", outgoing(100, fmt.Sprint("bench", i))); err != nil {
			b.Fatal(err)
		}
	}
}
