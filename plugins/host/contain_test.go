package host

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
)

// What the spy tries to get, and the host holds.
const (
	spyMarker      = "HERALD_SPY_MARK=visible-in-the-agents-environ"
	otherSecret    = "b-channel-SECRET-7f3a9c"
	nodeTokenValue = "admin-token-SECRET-41d2"
)

// spy is a channel plugin gone bad: it reads its parent's (the agent's)
// environment and puts what it got, with another channel's secret (given
// to it as a plain value) and a token, into every result's error.
type spy struct{ leak string }

func (*spy) Info(context.Context) (sdk.Info, error) { return sdk.Info{Name: "spy", Version: "1"}, nil }

func (s *spy) Configure(_ context.Context, raw json.RawMessage) error {
	var c struct {
		Leak string `json:"leak"`
	}
	err := json.Unmarshal(raw, &c)
	s.leak = c.Leak
	return err
}

func (s *spy) Send(_ context.Context, batch []sdk.Message) ([]sdk.Result, error) {
	got := fmt.Sprintf("uid=%d environ: ", os.Getuid())
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", os.Getppid())); err != nil {
		got += err.Error()
	} else {
		got += strings.ReplaceAll(string(b), "\x00", " ")
	}
	out := make([]sdk.Result, len(batch))
	for i, m := range batch {
		out[i] = sdk.Result{ID: m.ID, Status: sdk.StatusPermanent, Error: got + "; leak: " + s.leak + " " + nodeTokenValue}
	}
	return out, nil
}

// runSpyHost is a host process (the agent's part) holding a secret in its
// environment: it hides itself as the agent does, starts the spy and a
// channel whose secret the spy leaks, sends one message through the spy,
// and prints the result.
func runSpyHost() {
	fail := func(err error) { fmt.Println("error:", err); os.Exit(1) }
	if err := HideProcess(); err != nil {
		fail(err)
	}
	dir, err := os.MkdirTemp("", "spyhost")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	exe, err := os.Executable()
	if err != nil {
		fail(err)
	}
	// An external plugin, allowed by its hash, as an operator installs one.
	if err := os.Symlink(exe, filepath.Join(dir, ExternalPrefix+"spy")); err != nil {
		fail(err)
	}
	sum, err := FileSHA256(exe)
	if err != nil {
		fail(err)
	}
	h, err := New(Config{
		PluginsDir:   dir,
		PluginSHA256: map[string]string{"spy": sum},
		Channels: map[string]ChannelConfig{
			"spy": {Plugin: "spy", Config: map[string]any{"leak": otherSecret}},
			"b":   {Plugin: "mock", Config: map[string]any{"outbox": filepath.Join(dir, "b.jsonl"), "secret": otherSecret}},
		},
		Secrets:        []string{nodeTokenValue},
		BuiltinCmdFunc: selfCmd,
	})
	if err == nil {
		err = h.Start(context.Background())
	}
	if err != nil {
		fail(err)
	}
	res, err := h.Send(context.Background(), "spy", outgoing(1, "spy"))
	if err != nil {
		fail(err)
	}
	h.Close()
	fmt.Println("result:", res[0].Error)
}

// Issue 19: an allowed plugin runs as the agent's user, so it could read
// /proc/<agent>/environ (every token, the cluster secret, every channel's
// secret), and any text it returned as a result's error reached every read
// token through GET /v1/deliveries, with only its own channel's secrets
// redacted. Now the agent is not dumpable (HideProcess), so the read
// fails, and every secret the node knows is redacted from every plugin's
// texts. The host runs as its own process holding spyMarker in its
// environment; as root (CI) it runs as nobody, since root reads any
// process's environ whatever. On the code before, the result held the
// marker and the other channel's secret.
func TestPluginCannotReadTheAgentOrLeakSecrets(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	if os.Geteuid() == 0 {
		exe = copyExecutable(t, exe) // nobody must be able to run it
		cmd = exec.Command(exe)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		cmd.Dir = filepath.Dir(exe)
	}
	cmd.Env = []string{envRole + "=spyhost", "GORACE=atexit_sleep_ms=0", spyMarker}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	text := string(out)
	require.Contains(t, text, "environ: ")
	require.Contains(t, text, "permission denied", "the agent's environ is not readable")
	require.NotContains(t, text, "visible-in-the-agents-environ")
	require.NotContains(t, text, otherSecret, "another channel's secret is redacted")
	require.NotContains(t, text, nodeTokenValue, "a token is redacted")
	require.Contains(t, text, "leak: [REDACTED] [REDACTED]")
}

// copyExecutable copies exe into a directory anyone may enter.
func copyExecutable(t *testing.T, exe string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "herald-spy")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	dst := filepath.Join(dir, "host.test")
	install(t, exe, dst)
	return dst
}

// writeExecutable writes a script that the test then runs.
func writeExecutable(t *testing.T, path string, script []byte) {
	t.Helper()
	src := path + ".src"
	require.NoError(t, os.WriteFile(src, script, 0o600))
	install(t, src, path)
	require.NoError(t, os.Remove(src))
}

// install copies src to dst, mode 0755, in a process of its own. Written
// from this one, dst's descriptor would be inherited by any child a
// parallel test forks in that moment, and exec'ing dst then fails with
// "text file busy" (ETXTBSY) until that child has exec'd in turn; CI hit
// it once. The install process forks nothing, so when it exits nobody
// holds dst open for writing.
func install(t *testing.T, src, dst string) {
	t.Helper()
	out, err := exec.Command("install", "-m", "0755", src, dst).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// With plugin_user, an agent run as root starts its plugins as that user:
// they cannot read the agent's environ (or its files) whatever its
// dumpable flag. Needs root to run.
func TestPluginUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("starting a plugin as another user needs root")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	exe = copyExecutable(t, exe)
	dir := filepath.Dir(exe)
	require.NoError(t, os.Symlink(exe, filepath.Join(dir, ExternalPrefix+"spy")))
	sum, err := FileSHA256(exe)
	require.NoError(t, err)
	b := setup(t, map[string]ChannelConfig{"spy": {Plugin: "spy", Config: map[string]any{"leak": "x"}}},
		func(c *Config) {
			c.PluginsDir, c.PluginSHA256, c.PluginUser = dir, map[string]string{"spy": sum}, "nobody"
		})
	res, err := b.h.Send(context.Background(), "spy", outgoing(1, "spy"))
	require.NoError(t, err)
	require.Contains(t, res[0].Error, "uid=65534 environ: ")
	require.Contains(t, res[0].Error, "permission denied")

	_, err = New(Config{PluginUser: "no-such-user-herald"})
	require.ErrorIs(t, err, ErrConfig)
}
