package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReloadRefusedNamesTheFixedKeys: a reload that changes a key a
// running node cannot change names it; reloadable keys pass and are named
// as changed.
func TestReloadRefusedNamesTheFixedKeys(t *testing.T) {
	t.Parallel()
	cur := nodeConfig{NodeID: "n1", DataDir: "d", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2", LogLevel: "info"}
	next := cur
	next.LogLevel, next.Retention = "debug", "200h"
	require.NoError(t, reloadRefused(&cur, &next))
	require.Equal(t, []string{"log_level", "retention"}, reloadChanges(&cur, &next))

	next.NodeID, next.HTTPAddr = "n9", "127.0.0.1:3"
	err := reloadRefused(&cur, &next)
	require.EqualError(t, err, "config reload refused: node_id, http_addr cannot change while the node runs (restart the node to change them); nothing was applied")
	next = cur
	next.Channels = map[string]map[string]any{"late": {"plugin": "mock"}}
	next.PluginSHA256 = map[string]string{"x": "y"}
	require.NoError(t, reloadRefused(&cur, &next))
	require.Equal(t, []string{"channels", "plugin_sha256"}, reloadChanges(&cur, &next))
}

// TestTokenFile: a token's secret may come from a file (re-read on every
// reload); not with token as well, and never too short.
func TestTokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, short := filepath.Join(dir, "good"), filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(good, []byte("0123456789abcdef0123\n"), 0o600))
	require.NoError(t, os.WriteFile(short, []byte("abc"), 0o600))
	toks, err := resolveTokens([]tokenConfig{{Name: "f", Role: "read", TokenFile: good}}, nil)
	require.NoError(t, err)
	require.Equal(t, "0123456789abcdef0123", toks[0].Secret)
	_, err = resolveTokens([]tokenConfig{{Name: "f", Role: "read", TokenFile: short}}, nil)
	require.ErrorContains(t, err, `config: token "f": the value of token_file `+short+" is shorter than 16 characters")
	require.NotContains(t, err.Error(), "abc")
	_, err = resolveTokens([]tokenConfig{{Name: "f", Role: "read", TokenFile: good, Token: "${X}"}}, nil)
	require.EqualError(t, err, `config: token "f": give token or token_file, not both`)
	_, err = resolveTokens([]tokenConfig{{Name: "f", Role: "read", TokenFile: filepath.Join(dir, "none")}}, nil)
	require.ErrorContains(t, err, "token_file: open")
}

// TestCallbackChangesAreRefused: a wecom channel's callback receiver is
// built at start, so a reload may not change its keys.
func TestCallbackChangesAreRefused(t *testing.T) {
	t.Parallel()
	cb := map[string]any{"plugin": "wecom", "callback_token": "${T}", "callback_aes_key": "${K}", "corp_id": "c"}
	cur := map[string]map[string]any{"w": cb, "m": {"plugin": "mock"}}
	require.Empty(t, callbackChanges(cur, map[string]map[string]any{"w": cb, "m": {"plugin": "mock", "outbox": "x"}}))
	moved := map[string]any{"plugin": "wecom", "callback_token": "${T}", "callback_aes_key": "${K}", "corp_id": "other"}
	require.Equal(t, []string{"w"}, callbackChanges(cur, map[string]map[string]any{"w": moved}))
	require.Equal(t, []string{"w"}, callbackChanges(cur, map[string]map[string]any{}))
}
