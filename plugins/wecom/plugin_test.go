package wecom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/plugins/host"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

// pluginCmd runs this test binary as the wecom plugin (see TestMain).
func pluginCmd(t testing.TB) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	// Under -race a process sleeps 1s at exit unless told not to.
	cmd.Env = []string{envServe + "=1", "GORACE=atexit_sleep_ms=0"}
	return cmd
}

// startHost runs a plugin host whose channel "wc" is the wecom plugin, in
// its own process, pointed at the env's fake in app mode. extra adds keys
// to the channel's config.
func startHost(t testing.TB, e *env, extra map[string]any) *host.Host {
	t.Helper()
	cfg := map[string]any{
		"base_url": e.api.URL,
		"corp_id":  wecomfake.DemoCorpID,
		"agent_id": wecomfake.DemoAgentID,
		"secret":   wecomfake.DemoSecret,
	}
	for k, v := range extra {
		cfg[k] = v
	}
	h, err := host.New(host.Config{
		Channels:       map[string]host.ChannelConfig{"wc": {Plugin: "wecom", Config: cfg}},
		BuiltinCmdFunc: func(string) *exec.Cmd { return pluginCmd(t) },
		Logger:         slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		HealthInterval: 50 * time.Millisecond,
		RestartMin:     10 * time.Millisecond,
		RestartMax:     100 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, h.Start(ctx))
	require.True(t, h.Status()[0].Healthy, "%+v", h.Status())
	return h
}

// pluginPid is the running wecom plugin's process id.
func pluginPid(t *testing.T, h *host.Host) int {
	t.Helper()
	pid := h.Pid("wc")
	require.Positive(t, pid, "no running plugin: %+v", h.Status())
	return pid
}

func outgoing(prefix string, from, n int) []heraldtype.Message {
	out := make([]heraldtype.Message, n)
	for i := range out {
		u := fmt.Sprintf("u%03d", from+i)
		out[i] = heraldtype.Message{
			ID:             prefix + "-" + u,
			IdempotencyKey: "key-" + prefix + "-" + u,
			Recipient:      u,
			Payload:        text(prefix + " for " + u),
			Attempt:        1,
		}
	}
	return out
}

// TestPluginKilledMidBurst kills the wecom plugin process in the middle of
// a burst of 300 messages. The host restarts it and sends the batches that
// were in flight once more, unchanged; messages the dead process had
// already delivered are resent too (their replies were lost) and WeCom's
// duplicate check stops them. Every member gets their message exactly once.
func TestPluginKilledMidBurst(t *testing.T) {
	t.Parallel()
	const total, senders, batchSize = 300, 4, 25
	e := fakeOnly(t, members(total))
	e.fake.SetLatency(20 * time.Millisecond) // the burst takes long enough to be cut
	h := startHost(t, e, map[string]any{"concurrency": 8})
	pid := pluginPid(t, h)

	var wg sync.WaitGroup
	errs := make(chan error, total/batchSize)
	var mu sync.Mutex
	outcomes := map[string]heraldtype.Result{}
	for s := range senders {
		wg.Go(func() {
			for b := s; b*batchSize < total; b += senders {
				batch := outgoing("burst", b*batchSize+1, batchSize)
				out, err := h.Send(context.Background(), "wc", batch)
				if err != nil {
					errs <- fmt.Errorf("batch %d: %w", b, err)
					continue
				}
				mu.Lock()
				for _, o := range out {
					outcomes[o.ID] = o
				}
				mu.Unlock()
			}
		})
	}
	require.Eventually(t, func() bool { return len(e.fake.Messages()) >= 60 }, 20*time.Second, time.Millisecond, "the burst started")
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	atKill := len(e.fake.Messages())
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Less(t, atKill, total, "the plugin died mid-burst")

	require.Len(t, outcomes, total)
	for id, o := range outcomes {
		require.Equal(t, heraldtype.StatusSent, o.Status, "%s: %+v", id, o)
		require.NotEmpty(t, o.ProviderID, id)
	}
	for i := 1; i <= total; i++ {
		u := fmt.Sprintf("u%03d", i)
		require.Equal(t, []string{"burst for " + u}, contents(e.fake, u), "%s got the message exactly once", u)
	}
	dups := 0
	for _, d := range e.fake.Drops() {
		require.Equal(t, wecomfake.DropDuplicate, d.Reason, "no silent limit drops")
		dups++
	}
	require.Positive(t, dups, "the retried batches resent messages the dead plugin had delivered, and WeCom's duplicate check stopped them")
	require.Equal(t, 2, e.fake.Calls("gettoken"), "one token fetch per plugin process")
	t.Logf("killed after %d of %d delivered; %d resends stopped as duplicates; %d message/send calls", atKill, total, dups, e.fake.Calls("message/send"))

	st := h.Status()[0]
	require.Equal(t, 1, st.Restarts, "%+v", st)
	require.NotEqual(t, pid, pluginPid(t, h), "a new process")
}

// TestHostPacesOneMemberThroughPlugin is the executor's path for 100
// messages to one member, all due within a minute: the host asks its
// limiter (built from the limits the wecom plugin process declared) before
// every send, on a clock shared with the fake. WeCom's per-member windows
// at the fake then drop nothing, and everything arrives, in order.
func TestHostPacesOneMemberThroughPlugin(t *testing.T) {
	t.Parallel()
	e := fakeOnly(t, wecomfake.Config{})
	h := startHost(t, e, nil)
	start := e.clock.Now()
	const n = 100
	waited := 0
	for i := 0; i < n; {
		e.clock.Set(start.Add(time.Duration(i) * 600 * time.Millisecond)) // due
		now := e.clock.Now()
		if w := h.Admit("wc", "alice", heraldtype.PriorityNormal, now); w > 0 {
			waited++
			e.clock.Set(now.Add(w))
			continue
		}
		u := heraldtype.Message{ID: fmt.Sprint("n", i), IdempotencyKey: fmt.Sprint("key-n", i), Recipient: "alice",
			Payload: text(fmt.Sprintf("note %d", i)), Attempt: 1}
		out, err := h.Send(context.Background(), "wc", []heraldtype.Message{u})
		require.NoError(t, err)
		require.Equal(t, heraldtype.StatusSent, out[0].Status, "%+v", out[0])
		i++
	}
	require.Positive(t, waited, "the limiter held messages back")
	require.Empty(t, e.fake.Drops(), "no message was dropped silently")
	got := contents(e.fake, "alice")
	require.Len(t, got, n, "all arrive")
	for i, c := range got {
		require.Equal(t, fmt.Sprintf("note %d", i), c)
	}
	t.Logf("100 messages paced over %s of (fake) time", e.clock.Now().Sub(start))
}

// BenchmarkSendThroughPlugin measures messages per second from the host's
// Send through the wecom plugin process to the fake on loopback: app mode,
// batches of 100 to distinct members, no limits at the fake (Send does not
// consult the host's limits; Admit does). Compare BenchmarkSend, the same
// without the plugin boundary.
func BenchmarkSendThroughPlugin(b *testing.B) {
	for _, conc := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			cfg := members(1000)
			cfg.MemberPerMinute, cfg.MemberPerHour = -1, -1
			cfg.MaxRecords = 10_000
			e := fakeOnly(b, cfg)
			h := startHost(b, e, map[string]any{"concurrency": conc})
			const size = 100
			batch := make([]heraldtype.Message, size)
			n := 0
			for b.Loop() {
				for i := range batch {
					n++
					u := fmt.Sprintf("u%03d", n%1000+1)
					batch[i] = heraldtype.Message{ID: fmt.Sprint(n), IdempotencyKey: fmt.Sprint("key-", n), Recipient: u,
						Payload: json.RawMessage(fmt.Sprintf(`{"msgtype":"text","content":"bench %d"}`, n)), Attempt: 1}
				}
				out, err := h.Send(context.Background(), "wc", batch)
				if err != nil || len(out) != size || out[size-1].Status != heraldtype.StatusSent {
					b.Fatalf("send: %v %+v", err, out)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
