package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// `herald plugins list` never runs a plugin whose sha256 is not listed: it
// shows the sum and the config line that would allow it.
func TestPluginsListNeverRunsUnlisted(t *testing.T) {
	t.Parallel()
	dir, marks := t.TempDir(), t.TempDir()
	marker := filepath.Join(marks, "ran")
	script := []byte("#!/bin/sh\ntouch " + marker + "\nexit 1\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "herald-channel-evil"), script, 0o755))
	sum := sha256.Sum256(script)
	hexsum := hex.EncodeToString(sum[:])

	out, err := runHerald(t, "plugins", "list", "--dir", dir)
	require.NoError(t, err)
	t.Logf("herald plugins list --dir DIR:\n%s", out)
	require.Regexp(t, `evil\s+external\s+not run\s+`+hexsum, out)
	require.Contains(t, out, "plugin_sha256:\n  evil: "+hexsum+"\n")
	_, err = os.Stat(marker)
	require.True(t, os.IsNotExist(err), "the plugin was run")

	// A config listing another sum does not allow it either.
	cfg := filepath.Join(marks, "node.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("plugin_sha256: {evil: "+hex.EncodeToString(make([]byte, 32))+"}\n"), 0o644))
	out, err = runHerald(t, "plugins", "list", "--dir", dir, "--config", cfg)
	require.NoError(t, err)
	require.Contains(t, out, "not run")
	// …and says the listed sum differs, not that the name is unlisted.
	require.Contains(t, out, "the file changed?")
	require.NotContains(t, out, "add to every node's config")
	_, err = os.Stat(marker)
	require.True(t, os.IsNotExist(err), "the plugin was run")

	require.NoError(t, os.WriteFile(cfg, []byte("plugin_sha256: {evil: nothex}\n"), 0o644))
	_, err = runHerald(t, "plugins", "list", "--dir", dir, "--config", cfg)
	require.ErrorContains(t, err, "want 64 hex digits")
}
