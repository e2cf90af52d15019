package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/plugins/conformance"
	"github.com/heraldhq/herald/plugins/host"
	"github.com/heraldhq/herald/plugins/sdk"
)

// The test binary is the plugin too: launched by the host (which sets the
// magic cookie), it runs main instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv(sdk.Handshake.MagicCookieKey) == sdk.Handshake.MagicCookieValue {
		main()
		return
	}
	// Plugins inherit this, and so do not sleep 1s at exit under -race.
	_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
	goleak.VerifyTestMain(m)
}

func delivered(path string) func(t *testing.T, key string) int {
	return func(t *testing.T, key string) int {
		f, err := os.Open(path)
		if os.IsNotExist(err) {
			return 0
		}
		require.NoError(t, err)
		defer f.Close()
		n := 0
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fields := strings.Split(sc.Text(), "\t"); len(fields) == 4 && fields[1] == key {
				n++
			}
		}
		require.NoError(t, sc.Err())
		return n
	}
}

func fileConfig(t *testing.T) (string, json.RawMessage) {
	path := filepath.Join(t.TempDir(), "out.log")
	return path, json.RawMessage(fmt.Sprintf(`{"channel":"c","file":%q}`, path))
}

func TestConformanceInProcess(t *testing.T) {
	t.Parallel()
	conformance.Run(t, func(t *testing.T) conformance.Subject {
		path, cfg := fileConfig(t)
		return conformance.Subject{
			Channel:       newChannel(),
			Config:        cfg,
			BadConfigs:    []json.RawMessage{json.RawMessage(`{"channel":"c"}`)},
			DeliveredFunc: delivered(path),
			RestartFunc:   func(*testing.T) sdk.Channel { return newChannel() },
		}
	})
}

func TestConformanceThroughPlugin(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	conformance.Run(t, func(t *testing.T) conformance.Subject {
		path, cfg := fileConfig(t)
		launch := func(t *testing.T) sdk.Channel {
			p, err := host.Launch(context.Background(), exec.Command(exe), nil)
			require.NoError(t, err)
			t.Cleanup(p.Close)
			return p.Channel()
		}
		return conformance.Subject{Channel: launch(t), Config: cfg, DeliveredFunc: delivered(path), RestartFunc: launch}
	})
}

// TestDroppedIntoPluginsDir is the user's path: the binary, named
// herald-channel-example in the plugins directory, provides plugin
// "example" to a host.
func TestDroppedIntoPluginsDir(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(exe, filepath.Join(dir, "herald-channel-example")))
	out := filepath.Join(dir, "audit.log")
	// An external plugin runs only when its sum is listed, as a user's
	// plugin_sha256 would list it.
	sum, err := host.FileSHA256(exe)
	require.NoError(t, err)

	h, err := host.New(host.Config{
		PluginsDir:   dir,
		PluginSHA256: map[string]string{"example": sum},
		Channels:     map[string]host.ChannelConfig{"audit": {Plugin: "example", Config: map[string]any{"file": out}}},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, h.Close()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, h.Start(ctx))
	require.True(t, h.Status()[0].Healthy, "%+v", h.Status())

	// The example's limits are enforced by the host: 20 per minute per
	// recipient is a bucket of 10 that gains one every 6s (so no minute
	// holds more than 20), and 20% of the bucket is kept for high priority.
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	admitted := 0
	for h.Admit("audit", "alice", heraldtype.PriorityNormal, now) == 0 {
		admitted++
	}
	require.Equal(t, 8, admitted)
	require.Zero(t, h.Admit("audit", "alice", heraldtype.PriorityHigh, now))

	res, err := h.Send(ctx, "audit", []heraldtype.Message{{ID: "1", IdempotencyKey: "k1", Recipient: "alice", Payload: json.RawMessage(`{"text": "hi"}`)}})
	require.NoError(t, err)
	require.Equal(t, heraldtype.StatusSent, res[0].Status)
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(string(raw), "\tk1\talice\t{\"text\":\"hi\"}\n"), "%q", raw)
}

// TestFailedWriteIsNotRemembered: a batch whose write failed was not
// delivered; its retry must be written, not answered as already sent.
func TestFailedWriteIsNotRemembered(t *testing.T) {
	t.Parallel()
	path, cfg := fileConfig(t)
	c := newChannel()
	require.NoError(t, c.Configure(context.Background(), cfg))
	batch := []sdk.Message{{ID: "1", IdempotencyKey: "k1", Recipient: "alice", Payload: json.RawMessage(`{}`), Attempt: 1}}

	require.NoError(t, os.Mkdir(path, 0o755)) // the file cannot be opened for writing
	_, err := c.Send(context.Background(), batch)
	require.Error(t, err)
	require.NoError(t, os.Remove(path))

	batch[0].Attempt = 2
	res, err := c.Send(context.Background(), batch)
	require.NoError(t, err)
	require.Equal(t, sdk.StatusSent, res[0].Status)
	require.Equal(t, 1, delivered(path)(t, "k1"), "the retry was written")
}

// A message of a megabyte or more makes a line longer than a
// bufio.Scanner's default-sized buffer. The example's Configure read its
// file with a 1 MiB cap, so once such a message was written every restart
// failed ("token too long") and the channel never came back. The file is
// read line by line without a cap, and the key is still known.
func TestLongLineDoesNotStopTheRestart(t *testing.T) {
	t.Parallel()
	path, cfg := fileConfig(t)
	ch := newChannel()
	require.NoError(t, ch.Configure(context.Background(), cfg))
	big := sdk.Message{ID: "big", IdempotencyKey: "key-big", Recipient: "alice",
		Payload: json.RawMessage(`{"t":"` + strings.Repeat("汉", 700_000) + `"}`), Attempt: 1}
	res, err := ch.Send(context.Background(), []sdk.Message{big})
	require.NoError(t, err)
	require.Equal(t, sdk.StatusSent, res[0].Status, "%+v", res[0])

	restarted := newChannel()
	require.NoError(t, restarted.Configure(context.Background(), cfg), "configure after a restart")
	big.Attempt = 2
	res, err = restarted.Send(context.Background(), []sdk.Message{big})
	require.NoError(t, err)
	require.Equal(t, sdk.StatusSent, res[0].Status)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(data), "\tkey-big\t"), "written once")
}
