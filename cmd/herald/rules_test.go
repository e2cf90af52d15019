package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// runHerald runs the root command with args and returns stdout and the
// error Execute returned (main exits 1 on an error).
func runHerald(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

const examplesDir = "../../rules/examples"

func TestRulesCheckCmd(t *testing.T) {
	t.Parallel()
	out, err := runHerald(t, "rules", "check", examplesDir)
	require.NoError(t, err)
	require.Contains(t, out, "all files are good")

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.lua"),
		[]byte("return rule {\n  name = \"bad\",\n  schedule = \"0 25 * * *\",\n  channel = \"mock\",\n"+
			"  recipients = function(run) return {} end,\n  message = function(run, to) return {} end,\n}\n"), 0o644))
	out, err = runHerald(t, "rules", "check", dir)
	require.Error(t, err)
	require.Contains(t, out, "bad.lua:3: ")
}

func TestRulesListCmd(t *testing.T) {
	t.Parallel()
	out, err := runHerald(t, "rules", "list", examplesDir, "--now", "2026-09-30T12:00:00+08:00", "--json")
	require.NoError(t, err)
	var rows []struct {
		Name string   `json:"name"`
		Next []string `json:"next"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 7)
	for _, r := range rows {
		if r.Name == "daily_report" {
			// After 30 September: the National Day week is off, Saturday
			// 10 October is a make-up workday.
			require.Equal(t, []string{"2026-10-08T09:00:00+08:00", "2026-10-09T09:00:00+08:00",
				"2026-10-10T09:00:00+08:00", "2026-10-12T09:00:00+08:00", "2026-10-13T09:00:00+08:00"}, r.Next)
		}
	}
	out, err = runHerald(t, "rules", "list", examplesDir)
	require.NoError(t, err)
	require.Contains(t, out, "NAME")
	require.Contains(t, out, "api task")
}

func TestRulesPreviewCmd(t *testing.T) {
	t.Parallel()
	out, err := runHerald(t, "rules", "preview", "daily_report", "--dir", examplesDir, "--at", "2026-12-01T09:00:00+08:00")
	require.NoError(t, err)
	require.Contains(t, out, "5 recipient(s)")
	require.Contains(t, out, "wangfang (王芳)")

	out, err = runHerald(t, "rules", "preview", "daily_report", "--dir", examplesDir, "--at", "2026-10-01 09:00")
	require.NoError(t, err)
	require.Contains(t, out, "nobody: 2026-10-01 is not a workday")

	out, err = runHerald(t, "rules", "preview", "follow_up", "--dir", examplesDir, "--json",
		"--data", `{"owner":"wangfang","customer":"华东机电","overdue":true}`)
	require.NoError(t, err)
	var res struct {
		Deliveries []struct{ Recipient string } `json:"deliveries"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Deliveries, 2)

	_, err = runHerald(t, "rules", "preview", "nope", "--dir", examplesDir)
	require.ErrorContains(t, err, "unknown rule")
	_, err = runHerald(t, "rules", "preview", "daily_report", "--dir", examplesDir, "--at", "tomorrow")
	require.ErrorContains(t, err, "--at")
}

// TestRulesCheckMemoryLimit: check refuses a file whose top level grows
// memory past the rule memory limit, the node's (--config) or the flag's.
// Each check follows one that kept the same 24 MiB alive: a file's top
// level is measured from a fresh collection, so that table makes no room.
func TestRulesCheckMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	// About 24 MiB, kept: under the default 128 MiB, over 16 MiB; small
	// enough to build well within the 2 s time limit under -race on a busy
	// machine (60 MiB did not, now and then).
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.lua"), []byte(
		"local t = {}\nfor i = 1, 24 do t[i] = string.rep(\"x\", 2^20 - 64) .. i end\n"+
			"return rule {\n  name = \"big\", channel = \"mock\",\n"+
			"  recipients = function(run) return {} end,\n  message = function(run, to) return {} end,\n}\n"), 0o644))
	out, err := runHerald(t, "rules", "check", dir)
	require.NoError(t, err, out)

	out, err = runHerald(t, "rules", "check", dir, "--rule-memory-limit", "16MiB")
	require.Error(t, err, out)
	// Stopped at line 2 by the watch, or as the top level returned.
	require.Regexp(t, `big\.lua(:2)?: stopped( as it returned)?: the node's live memory grew by`, out)
	require.Contains(t, out, "over the rule memory limit of 16MiB")

	cfg := filepath.Join(t.TempDir(), "node.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("rule_memory_limit: 16MiB\n"), 0o644))
	out, err = runHerald(t, "rules", "check", dir, "--config", cfg)
	require.Error(t, err)
	require.Contains(t, out, "over the rule memory limit of 16MiB")
	out, err = runHerald(t, "rules", "check", dir, "--config", cfg, "--rule-memory-limit", "1GiB")
	require.NoError(t, err, out)

	_, err = runHerald(t, "rules", "check", dir, "--rule-memory-limit", "lots")
	require.ErrorContains(t, err, `--rule-memory-limit "lots": want a size of at least 16MiB`)
}

// TestRulesCheckTimeLimit: check refuses a file whose top level runs past
// the rule time limit, the flag's or the node's (--config), the flag over
// the config, as a node with that rule_timeout would.
func TestRulesCheckTimeLimit(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "spin.lua"), []byte("while true do end\n"), 0o644))
	out, err := runHerald(t, "rules", "check", dir, "--rule-timeout", "100ms")
	require.Error(t, err, out)
	require.Regexp(t, `spin\.lua:1: stopped after 100ms`, out)

	cfg := filepath.Join(t.TempDir(), "node.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("rule_timeout: 150ms\n"), 0o644))
	out, err = runHerald(t, "rules", "check", dir, "--config", cfg)
	require.Error(t, err, out)
	require.Contains(t, out, "stopped after 150ms")
	out, err = runHerald(t, "rules", "check", dir, "--config", cfg, "--rule-timeout", "100ms")
	require.Error(t, err, out)
	require.Contains(t, out, "stopped after 100ms")

	_, err = runHerald(t, "rules", "check", dir, "--rule-timeout", "2h")
	require.ErrorContains(t, err, `--rule-timeout "2h": want a duration from 100ms to 1m0s`)
}
