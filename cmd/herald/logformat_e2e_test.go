package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// jsonLogLines parses every line of an agent's log as one JSON object and
// returns them; a line that is not one fails the test, quoting it.
func jsonLogLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for i := 1; sc.Scan(); i++ {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), "%s line %d is not a JSON object: %q", filepath.Base(path), i, sc.Text())
		for _, k := range []string{"time", "level", "msg"} {
			require.Contains(t, rec, k, "%s line %d", filepath.Base(path), i)
		}
		out = append(out, rec)
	}
	require.NoError(t, sc.Err())
	return out
}

// TestJSONLogsFromThreeNodes runs three agents with log_format json, set
// once by flag, once by HERALD_LOG_FORMAT and once in the config file, sends
// through the mock plugin, hands leadership over, stops them all, and
// parses every line each wrote: Raft's and the plugins' lines are JSON
// too, and Raft's level follows log_level.
func TestJSONLogsFromThreeNodes(t *testing.T) {
	c := setupE2E(t)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	cfg3 := filepath.Join(c.dir, "n3.yaml")
	base, err := os.ReadFile(c.config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfg3, append(base, "log_format: json\n"...), 0o644))

	c.start(n1, "--bootstrap", "--log-format", "json", "--log-level", "debug")
	eventually(t, 20*time.Second, "n1 leads", func() bool { return c.leader(n1) == n1 })
	c.startEnv(n2, []string{"HERALD_LOG_FORMAT=json"}, "--join", n1.http)
	c.start(n3, "--join", n1.http, "--config", cfg3)
	eventually(t, 30*time.Second, "three voters", func() bool { return votersAt(n1.http) == "n1 n2 n3" })
	eventually(t, 20*time.Second, "the tick rule sends through the mock plugin", func() bool { return c.countOutbox(`"alice"`) >= 3 })
	c.stop(n1) // SIGTERM: the leader hands over, Raft logs the new term
	eventually(t, 20*time.Second, "a new leader", func() bool { return c.leader(n2, n3) != nil })
	c.stopAll()

	components, pluginLines := map[string]map[string]bool{}, map[string]map[string]bool{}
	for _, n := range c.nodes {
		lines := jsonLogLines(t, filepath.Join(c.dir, n.id+".log"))
		require.NotEmpty(t, lines, n.id)
		require.Equal(t, "herald starting", lines[0]["msg"], "%s: the first line names the build", n.id)
		components[n.id], pluginLines[n.id] = map[string]bool{}, map[string]bool{}
		for _, rec := range lines {
			if _, ok := rec["plugin"]; ok {
				pluginLines[n.id][rec["msg"].(string)] = true
			}
			comp, _ := rec["component"].(string)
			components[n.id][comp] = true
			if strings.HasPrefix(comp, "raft") && n != n1 {
				require.NotEqual(t, "DEBUG", rec["level"], "%s runs at info: Raft's level follows log_level: %v", n.id, rec)
			}
		}
	}
	t.Logf("components per node: %v", components)
	for _, n := range c.nodes {
		require.True(t, components[n.id]["raft"], "%s: Raft's lines are JSON objects (at info, which the fixed warn hid)", n.id)
	}
	// The mock plugin's own line, written by the plugin process and relayed
	// by go-plugin through the host's logger; the host's lines about it.
	for _, n := range c.nodes {
		require.True(t, pluginLines[n.id]["mock configured"], "%s: the plugin's own line is a JSON object", n.id)
	}
	require.True(t, pluginLines[n1.id]["starting plugin"], "n1 at debug: go-plugin's debug lines too")
}
