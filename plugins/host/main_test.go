package host

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/heraldhq/herald/engine/enginetest/poll"
	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/plugins/builtin"
	"github.com/heraldhq/herald/plugins/mock"
	"github.com/heraldhq/herald/plugins/sdk"
)

// The tests launch real plugin processes without building herald: the test
// binary runs again in a role given by envRole (or, for the external
// plugins the tests drop into a plugins directory as symlinks to it, by its
// file name).
const envRole = "HERALD_HOST_TEST_ROLE"

func TestMain(m *testing.M) {
	role := os.Getenv(envRole)
	if name := filepath.Base(os.Args[0]); strings.HasPrefix(name, ExternalPrefix) {
		role = strings.TrimPrefix(name, ExternalPrefix)
	}
	switch role {
	case "":
		// Plugins inherit this, and so do not sleep 1s at exit under -race.
		_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
		goleak.VerifyTestMain(m)
	case "ext":
		sdk.Serve(mock.New())
	case "v2":
		serveVersion2()
	case "verbose":
		sdk.Serve(verbose{})
	case "cancels":
		sdk.Serve(cancels{})
	case "hangs":
		sdk.Serve(hangs{})
	case "host":
		runHost()
	case "spy":
		sdk.Serve(&spy{})
	case "spyhost":
		runSpyHost()
	default:
		if f, ok := builtin.Lookup(role); ok {
			sdk.Serve(f())
		}
		fmt.Fprintf(os.Stderr, "unknown test role %q\n", role)
		os.Exit(2)
	}
}

// serveVersion2 serves the mock as a plugin built for protocol version 2.
func serveVersion2() {
	hs := sdk.Handshake
	hs.ProtocolVersion = sdk.ProtocolVersion + 1
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: hs,
		Plugins:         sdk.PluginSet(mock.New()),
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger:          hclog.NewNullLogger(),
	})
	os.Exit(0)
}

// runHost is a host process for the host-death test: it starts a mock
// channel, prints the plugin's pid and waits to be killed.
func runHost() {
	h, err := New(Config{
		Channels:       map[string]ChannelConfig{"m": {Plugin: "mock", Config: map[string]any{"outbox": os.Getenv("OUTBOX")}}},
		BuiltinCmdFunc: selfCmd,
	})
	if err == nil {
		err = h.Start(context.Background())
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	in := h.instances["m"]
	in.lock()
	p := in.cur
	in.unlock()
	if p == nil {
		fmt.Println("error: plugin did not start:", h.Status())
		os.Exit(1)
	}
	fmt.Printf("plugin-pid=%d\n", p.Pid())
	select {}
}

// selfCmd runs this test binary as the built-in plugin name.
func selfCmd(name string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(exe)
	// Under -race a process sleeps 1s at exit unless told not to.
	cmd.Env = []string{envRole + "=" + name, "GORACE=atexit_sleep_ms=0"}
	return cmd
}

// logBuffer collects log output safely across goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type bundle struct {
	h    *Host
	logs *logBuffer
	dir  string // a temp dir for outboxes and plugins
}

// setup starts a host over channels (each channel's config may use
// "OUTBOX", replaced by a fresh outbox path in the bundle's dir).
func setup(t *testing.T, channels map[string]ChannelConfig, mod func(*Config)) bundle {
	t.Helper()
	b := bundle{logs: &logBuffer{}, dir: t.TempDir()}
	for name, cc := range channels {
		if cc.Config["outbox"] == "OUTBOX" {
			cc.Config["outbox"] = filepath.Join(b.dir, name+".jsonl")
		}
	}
	cfg := Config{
		Channels:       channels,
		BuiltinCmdFunc: selfCmd,
		Logger:         slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		HealthInterval: 50 * time.Millisecond,
		RestartMin:     10 * time.Millisecond,
		RestartMax:     100 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	h, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, h.Start(ctx))
	b.h = h
	return b
}

func (b bundle) outbox(name string) string { return filepath.Join(b.dir, name+".jsonl") }

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	poll.Until(t, 20*time.Second, what, cond)
}

func statusOf(h *Host, name string) heraldtype.ChannelStatus {
	for _, s := range h.Status() {
		if s.Name == name {
			return s
		}
	}
	return heraldtype.ChannelStatus{}
}
