package mock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/heraldhq/herald/plugins/conformance"
	"github.com/heraldhq/herald/plugins/host"
	"github.com/heraldhq/herald/plugins/mock"
	"github.com/heraldhq/herald/plugins/sdk"
)

// envServe makes the test binary serve the mock as a plugin: the tests of
// the plugin boundary launch this binary again instead of building herald.
const envServe = "HERALD_MOCK_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(envServe) == "1" {
		sdk.Serve(mock.New())
		return
	}
	goleak.VerifyTestMain(m)
}

func outboxConfig(t *testing.T, extra string) (string, json.RawMessage) {
	path := filepath.Join(t.TempDir(), "outbox.jsonl")
	cfg := fmt.Sprintf(`{"channel":"test","outbox":%q%s}`, path, extra)
	return path, json.RawMessage(cfg)
}

func delivered(path string) func(t *testing.T, key string) int {
	return func(t *testing.T, key string) int {
		recs, err := mock.ReadOutbox(path)
		if os.IsNotExist(err) {
			return 0
		}
		require.NoError(t, err)
		return mock.Delivered(recs)[key]
	}
}

func TestConformanceInProcess(t *testing.T) {
	t.Parallel()
	conformance.Run(t, func(t *testing.T) conformance.Subject {
		path, cfg := outboxConfig(t, "")
		fresh := func(t *testing.T) sdk.Channel {
			c := mock.New()
			t.Cleanup(func() { _ = c.Close() })
			return c
		}
		return conformance.Subject{
			Channel:       fresh(t),
			Config:        cfg,
			BadConfigs:    []json.RawMessage{json.RawMessage(`{"channel":"x"}`), json.RawMessage(`{"outbox":"x","typo":1}`)},
			DeliveredFunc: delivered(path),
			RestartFunc:   fresh,
		}
	})
}

func TestConformanceThroughPlugin(t *testing.T) {
	t.Parallel()
	conformance.Run(t, func(t *testing.T) conformance.Subject {
		path, cfg := outboxConfig(t, "")
		return conformance.Subject{
			Channel:       launchMock(t).Channel(),
			Config:        cfg,
			DeliveredFunc: delivered(path),
			RestartFunc:   func(t *testing.T) sdk.Channel { return launchMock(t).Channel() },
		}
	})
}

func launchMock(t *testing.T) *host.Plugin {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	// Under -race a process sleeps 1s at exit unless told not to.
	cmd.Env = []string{envServe + "=1", "GORACE=atexit_sleep_ms=0"}
	p, err := host.Launch(context.Background(), cmd, nil)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

func msg(key, recipient string) sdk.Message {
	return sdk.Message{ID: "id-" + key, IdempotencyKey: key, Recipient: recipient, Payload: json.RawMessage(`{"text":"hi"}`), Attempt: 1}
}

func send(t *testing.T, c *mock.Channel, msgs ...sdk.Message) map[string]sdk.Result {
	t.Helper()
	res, err := c.Send(context.Background(), msgs)
	require.NoError(t, err)
	out := map[string]sdk.Result{}
	for _, r := range res {
		out[r.ID] = r
	}
	require.Len(t, out, len(msgs))
	return out
}

func configured(t *testing.T, cfg json.RawMessage) *mock.Channel {
	t.Helper()
	c := mock.New()
	require.NoError(t, c.Configure(context.Background(), cfg))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestOutboxRecord(t *testing.T) {
	t.Parallel()
	path, cfg := outboxConfig(t, "")
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	c := mock.New()
	c.NowFunc = func() time.Time { return at }
	require.NoError(t, c.Configure(context.Background(), cfg))
	t.Cleanup(func() { _ = c.Close() })

	r := send(t, c, msg("k1", "alice"))["id-k1"]
	require.Equal(t, sdk.StatusSent, r.Status)
	require.Equal(t, mock.ProviderID("k1"), r.ProviderID)

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.JSONEq(t, `{"key":"k1","id":"id-k1","recipient":"alice","channel":"test","payload":{"text":"hi"},"attempt":1,"received_at":"2026-03-02T09:00:00Z","duplicate":false}`, string(raw))
}

func TestDedupSurvivesRestartAndSharedOutbox(t *testing.T) {
	t.Parallel()
	path, cfg := outboxConfig(t, "")
	a := configured(t, cfg)
	send(t, a, msg("k1", "alice"), msg("k2", "bob"))

	// A restarted mock rebuilds the seen keys from the outbox.
	b := configured(t, cfg)
	r := send(t, b, msg("k1", "alice"), msg("k3", "carol"))
	require.Equal(t, sdk.StatusSent, r["id-k1"].Status)
	require.Equal(t, mock.ProviderID("k1"), r["id-k1"].ProviderID, "a duplicate answers like the first delivery")

	// a still runs and shares the outbox: it catches up on b's lines.
	send(t, a, msg("k3", "carol"))

	recs, err := mock.ReadOutbox(path)
	require.NoError(t, err)
	require.Len(t, recs, 5, "every receipt is recorded")
	require.Equal(t, map[string]int{"k1": 1, "k2": 1, "k3": 1}, mock.Delivered(recs))
	dups := 0
	for _, rec := range recs {
		if rec.Duplicate {
			dups++
		}
	}
	require.Equal(t, 2, dups)
}

func TestTornLineIsRepaired(t *testing.T) {
	t.Parallel()
	path, cfg := outboxConfig(t, "")
	whole := `{"key":"k1","id":"id-k1","recipient":"alice","channel":"test","payload":{},"attempt":1,"received_at":"2026-03-02T09:00:00Z","duplicate":false}`
	require.NoError(t, os.WriteFile(path, []byte(whole+"\n"+whole[:40]), 0o644))
	c := configured(t, cfg)
	send(t, c, msg("k1", "alice"), msg("k2", "bob"))
	recs, err := mock.ReadOutbox(path)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"k1": 1, "k2": 1}, mock.Delivered(recs))
}

func TestFaultKnobs(t *testing.T) {
	t.Parallel()
	path, cfg := outboxConfig(t, `,"fail_first_n":2,"permanent_for":["gone"],"rate_limited_for":["busy"],"retry_after":"3s"`)
	c := configured(t, cfg)
	r := send(t, c, msg("a", "alice"), msg("b", "alice"), msg("c", "alice"))
	require.Equal(t, sdk.StatusRetryable, r["id-a"].Status)
	require.Equal(t, "mock_fail_first_n", r["id-a"].Code)
	require.Equal(t, sdk.StatusRetryable, r["id-b"].Status)
	require.Equal(t, sdk.StatusSent, r["id-c"].Status)

	r = send(t, c, msg("d", "gone"), msg("e", "busy"), msg("a", "alice"))
	require.Equal(t, sdk.StatusPermanent, r["id-d"].Status)
	require.Equal(t, sdk.StatusRateLimited, r["id-e"].Status)
	require.Equal(t, 3*time.Second, r["id-e"].RetryAfter)
	require.Equal(t, sdk.StatusSent, r["id-a"].Status)

	recs, err := mock.ReadOutbox(path)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"a": 1, "c": 1}, mock.Delivered(recs), "only accepted messages are recorded")
}

func TestFailRateIsSeeded(t *testing.T) {
	t.Parallel()
	statuses := func() []sdk.Status {
		_, cfg := outboxConfig(t, `,"fail_rate":0.5,"seed":7`)
		c := configured(t, cfg)
		var out []sdk.Status
		for i := range 20 {
			key := fmt.Sprint(i)
			out = append(out, send(t, c, msg(key, "alice"))["id-"+key].Status)
		}
		return out
	}
	a, b := statuses(), statuses()
	require.Equal(t, a, b, "the same seed fails the same messages")
	require.Contains(t, a, sdk.StatusRetryable)
	require.Contains(t, a, sdk.StatusSent)
}

func TestCrashAfterNOncePerOutbox(t *testing.T) {
	t.Parallel()
	path, cfg := outboxConfig(t, `,"crash_after_n":2`)
	c := mock.New()
	var code int
	c.ExitFunc = func(c int) { code = c }
	require.NoError(t, c.Configure(context.Background(), cfg))
	t.Cleanup(func() { _ = c.Close() })
	_, err := c.Send(context.Background(), []sdk.Message{msg("a", "x"), msg("b", "x"), msg("c", "x")})
	require.Error(t, err)
	require.Equal(t, 3, code)
	recs, err := mock.ReadOutbox(path)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"a": 1, "b": 1}, mock.Delivered(recs), "crashed after the 2nd, before the 3rd")

	// Restarted on the same outbox, it does not crash again.
	d := configured(t, cfg)
	d.ExitFunc = func(int) { t.Error("crashed twice") }
	r := send(t, d, msg("a", "x"), msg("b", "x"), msg("c", "x"))
	require.Equal(t, sdk.StatusSent, r["id-c"].Status)
}

func TestSendDelayHonoursCancel(t *testing.T) {
	t.Parallel()
	path, cfg := outboxConfig(t, `,"send_delay":"1h"`)
	c := configured(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := c.Send(ctx, []sdk.Message{msg("a", "x")})
		done <- err
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	_, err := os.Stat(path)
	if err == nil {
		recs, err := mock.ReadOutbox(path)
		require.NoError(t, err)
		require.Empty(t, recs)
	}
}

func TestInfoLimitsFromConfig(t *testing.T) {
	t.Parallel()
	_, cfg := outboxConfig(t, `,"limits":[{"scope":"recipient","count":3,"per":"1m"},{"scope":"channel","count":100,"per":"1s"}]`)
	c := configured(t, cfg)
	info, err := c.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, "mock", info.Name)
	require.Equal(t, []sdk.Limit{{Scope: sdk.ScopeRecipient, Count: 3, Per: time.Minute}, {Scope: sdk.ScopeChannel, Count: 100, Per: time.Second}}, info.Limits)
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for cfg, want := range map[string]string{
		`{}`:                                  "outbox is required",
		`{"outbox":"x","nope":1}`:             `unknown field "nope"`,
		`{"outbox":"x","fail_rate":2}`:        "fail_rate 2 is outside 0..1",
		`{"outbox":"x","retry_after":"soon"}`: "invalid duration",
		`{"outbox":"x","limits":[{"scope":"day","count":1,"per":"1s"}]}`: `scope "day"`,
		`{"outbox":"x","fail_configure":true,"secret":"s3cret"}`:         "fail_configure",
	} {
		err := mock.New().Configure(context.Background(), json.RawMessage(cfg))
		require.ErrorIs(t, err, mock.ErrConfig, cfg)
		require.ErrorContains(t, err, want, cfg)
	}
	_, err := mock.New().Send(context.Background(), []sdk.Message{msg("a", "x")})
	require.ErrorIs(t, err, mock.ErrNotConfigured)
}
