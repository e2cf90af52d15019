package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// allowAll lists the SHA-256 of every herald-channel-* file in dir.
func allowAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	exts, err := Discover(dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range exts {
		sum, err := FileSHA256(e.Path)
		require.NoError(t, err)
		out[e.Name] = sum
	}
	return out
}

// trap writes a plugin script that, if ever run, creates marker.
func trap(t *testing.T, dir, name, marker string) string {
	t.Helper()
	path := filepath.Join(dir, ExternalPrefix+name)
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o755))
	return path
}

func requireAbsent(t *testing.T, path string) {
	t.Helper()
	_, err := os.Stat(path)
	require.True(t, os.IsNotExist(err), "%s exists: the plugin was run", path)
}

// An unlisted plugin is never executed: not to list it, not for its
// channel. Its channel is unhealthy and says which line would allow it.
func TestUnlistedPluginIsNeverRun(t *testing.T) {
	t.Parallel()
	dir, marks := t.TempDir(), t.TempDir()
	marker := filepath.Join(marks, "ran")
	path := trap(t, dir, "evil", marker)
	sum, err := FileSHA256(path)
	require.NoError(t, err)

	list, err := List(context.Background(), Config{PluginsDir: dir, BuiltinCmdFunc: selfCmd})
	require.NoError(t, err)
	var evil PluginInfo
	for _, p := range list {
		if p.Name == "evil" {
			evil = p
		}
		if p.Builtin {
			require.True(t, p.Allowed, "built-ins need no entry")
		}
	}
	require.Equal(t, sum, evil.SHA256)
	require.False(t, evil.Allowed)
	require.Contains(t, evil.Error, "plugin_sha256: { evil: "+sum+" }")
	requireAbsent(t, marker)

	b := setup(t, map[string]ChannelConfig{"e": {Plugin: "evil"}}, func(c *Config) { c.PluginsDir = dir })
	st := statusOf(b.h, "e")
	require.False(t, st.Healthy)
	require.Contains(t, st.Error, "not listed in plugin_sha256")
	requireAbsent(t, marker)

	// Listed under another sum: still not run.
	other := strings.Repeat("ab", 32)
	b = setup(t, map[string]ChannelConfig{"e": {Plugin: "evil"}}, func(c *Config) {
		c.PluginsDir, c.PluginSHA256 = dir, map[string]string{"evil": other}
	})
	require.Contains(t, statusOf(b.h, "e").Error, "plugin_sha256 lists "+other)
	requireAbsent(t, marker)
}

// The bytes executed are the bytes checked: a file swapped after the host
// read its sum is refused by go-plugin's check at start.
func TestSwappedPluginIsNotRun(t *testing.T) {
	t.Parallel()
	dir, marks := t.TempDir(), t.TempDir()
	marker := filepath.Join(marks, "ran")
	path := filepath.Join(dir, ExternalPrefix+"swap")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\nexit 1\n"), 0o755))
	allowed := allowAll(t, dir)
	h, err := New(Config{PluginsDir: dir, PluginSHA256: allowed, BuiltinCmdFunc: selfCmd,
		Channels: map[string]ChannelConfig{"s": {Plugin: "swap"}}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Close()) })
	path = trap(t, dir, "swap", marker) // replaced between the check and the start
	now, err := FileSHA256(path)
	require.NoError(t, err)
	require.NoError(t, h.Start(context.Background()))
	eventually(t, func() bool { return strings.Contains(statusOf(h, "s").Error, "checksum") }, "the start is refused for its checksum")
	requireAbsent(t, marker)
	// The reason says what changed and what to do, as for a file found
	// changed at startup, not only go-plugin's "checksums did not match".
	st := statusOf(h, "s").Error
	require.Contains(t, st, "not allowed")
	require.Contains(t, st, "sha256 "+now)
	require.Contains(t, st, "plugin_sha256 lists "+allowed["swap"])
}

func TestCheckSHA256(t *testing.T) {
	t.Parallel()
	sum, err := CheckSHA256("x", " "+strings.Repeat("AB", 32)+"\n")
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("ab", 32), sum)
	_, err = CheckSHA256("x", "abc")
	require.ErrorContains(t, err, "want 64 hex digits")
}

// An allowed external plugin comes back after a crash. go-plugin hashes the
// executable into the SecureConfig's Hash without resetting it, and the
// host gave every start of a channel the same one: the second start hashed
// the file on top of the first and was refused ("checksums did not
// match"), so a crashed external plugin never ran again.
func TestAllowedPluginRestartsAfterACrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	linkPlugin(t, dir, "ext")
	b := setup(t, map[string]ChannelConfig{"e": {Plugin: "ext", Config: map[string]any{"outbox": "OUTBOX", "crash_after_n": 2}}},
		func(c *Config) { c.PluginsDir, c.PluginSHA256 = dir, allowAll(t, dir) })
	batch := outgoing(5, "ext-crash")
	out, err := b.h.Send(context.Background(), "e", batch)
	require.NoError(t, err, "the batch is retried on the restarted plugin")
	requireAllSent(t, batch, out)
	st := statusOf(b.h, "e")
	require.Equal(t, 1, st.Restarts)
	require.True(t, st.Healthy, "%+v", st)
}
