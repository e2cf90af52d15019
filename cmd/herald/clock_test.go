package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// TestEveryTableInTZ: every table the CLI prints shows its times in --tz
// with the offset, and every time flag takes "YYYY-MM-DD HH:MM" in that
// zone.
func TestEveryTableInTZ(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	tz := []string{"--addr", addr, "--tz", "Asia/Shanghai"}

	// task submit --due in the local form, read in --tz.
	out, err := runHerald(t, append([]string{"task", "submit", "enq-1", "--rule", "enquiry_timeout", "--due", "2026-12-01 18:00"}, tz...)...)
	require.NoError(t, err)
	require.Equal(t, "task enq-1: rule enquiry_timeout due 2026-12-01 18:00:00 +08:00 (pending)\n", out)
	task, ok := node.FSM.Task("enq-1")
	require.True(t, ok)
	require.True(t, task.DueAt.Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)))

	// task list and get, and --from/--to in the local form.
	out, err = runHerald(t, append([]string{"task", "list", "--from", "2026-12-01 17:00", "--to", "2026-12-01 19:00"}, tz...)...)
	require.NoError(t, err)
	require.Regexp(t, `enq-1\s+enquiry_timeout\s+2026-12-01 18:00:00 \+08:00\s+pending`, out)
	out, err = runHerald(t, append([]string{"task", "get", "enq-1"}, tz...)...)
	require.NoError(t, err)
	require.Contains(t, out, "due        2026-12-01 18:00:00 +08:00\n")
	require.Contains(t, out, "submitted  2026-12-01 10:00:00 +08:00\n")

	// The same in another zone, from HERALD_TZ's flag twin.
	out, err = runHerald(t, "task", "list", "--addr", addr, "--tz", "UTC")
	require.NoError(t, err)
	require.Contains(t, out, "2026-12-01 10:00:00 +00:00")

	// deliveries list.
	slot := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	key := engine.RunKey("daily_report", slot)
	node.apply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: "daily_report", Slot: slot, Now: slot})
	node.apply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{
		{ID: engine.DeliveryID(key, "alice"), Recipient: "alice", Channel: "mock", NotBefore: slot, Deadline: slot.Add(time.Hour)}}})
	out, err = runHerald(t, append([]string{"deliveries", "list"}, tz...)...)
	require.NoError(t, err)
	require.Regexp(t, `alice\s+mock\s+pending\s+0\s+2026-12-01 09:00:00 \+08:00\s+-`, out)

	// alerts: the time column and the times inside the message.
	node.apply(t, engine.CmdRaiseAlert, engine.RaiseAlert{Cause: "skipped:daily_report", Rule: "daily_report",
		Message: "slot 2026-12-01T01:00:00Z of rule daily_report was missed", Now: slot})
	out, err = runHerald(t, append([]string{"alerts"}, tz...)...)
	require.NoError(t, err)
	require.Regexp(t, `2026-12-01 09:00:00 \+08:00\s+1\s+false\s+daily_report\s+slot 2026-12-01 09:00:00 \+08:00 of rule daily_report was missed`, out)

	// rules fire --slot, rules list --now and rules preview --at.
	out, err = runHerald(t, append([]string{"rules", "fire", "daily_report", "--slot", "2026-11-30 09:00"}, tz...)...)
	require.NoError(t, err)
	require.Contains(t, out, "slot 2026-11-30 09:00:00 +08:00")
	out, err = runHerald(t, "rules", "list", examplesDir, "--tz", "Europe/London", "--now", "2026-11-30 12:00")
	require.NoError(t, err)
	require.Regexp(t, `daily_report\s+0 9 \* \* \*\s+Asia/Shanghai\s+cn_workday\s+wecom_sales\s+2026-12-01 01:00:00 \+00:00,`, out)
	out, err = runHerald(t, "rules", "preview", "daily_report", "--dir", examplesDir, "--tz", "Asia/Shanghai", "--at", "2026-12-01 09:00")
	require.NoError(t, err)
	require.Contains(t, out, "at: 2026-12-01 09:00:00 +08:00\n")
	require.Contains(t, out, "5 recipient(s)")

	// A zone that does not exist is refused before anything is asked.
	_, err = runHerald(t, "task", "list", "--addr", addr, "--tz", "Asia/Shangai")
	require.ErrorContains(t, err, `--tz: time zone "Asia/Shangai"`)
}

// TestRulesCheckConfig: with --config, a channel the node does not have is
// an error with the file and line.
func TestRulesCheckConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "demo.lua"), []byte("return rule {\n  name = \"demo\",\n  schedule = \"@every 30s\",\n"+
		"  channel = \"mokc\",\n  recipients = function(run) return {\"a\"} end,\n  message = function(run, to) return {content = \"x\"} end,\n}\n"), 0o644))
	cfg := filepath.Join(t.TempDir(), "node.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("channels:\n  mock: {plugin: mock}\n  wecom_sales: {plugin: wecom}\n"), 0o644))
	out, err := runHerald(t, "rules", "check", dir)
	require.NoError(t, err, "without --config the channel is not checked")
	require.Contains(t, out, "all files are good")
	out, err = runHerald(t, "rules", "check", dir, "--config", cfg)
	require.Error(t, err)
	require.Equal(t, "demo.lua:4: channel \"mokc\" is not configured (have: mock, wecom_sales)\n", out)
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	out, err = runHerald(t, "rules", "check", dir, "--config", empty)
	require.Error(t, err)
	require.Contains(t, out, "(have: mock)", "a node without channels has the default mock")
}

// TestFindRulesDir: DIR, then --dir, then HERALD_RULES, then
// .herald-dev/rules when present, then ./rules.
func TestFindRulesDir(t *testing.T) {
	// Not parallel: it changes the working directory and the environment.
	wd, err := os.Getwd()
	require.NoError(t, err)
	tmp := t.TempDir()
	require.NoError(t, os.Chdir(tmp))
	t.Cleanup(func() { _ = os.Chdir(wd) })
	t.Setenv(rulesEnv, "")
	require.Equal(t, "rules", findRulesDir("", ""))
	require.NoError(t, os.MkdirAll(filepath.Join(tmp, ".herald-dev", "rules"), 0o755))
	require.Equal(t, filepath.Join(".herald-dev", "rules"), findRulesDir("", ""))
	t.Setenv(rulesEnv, "/etc/herald/rules")
	require.Equal(t, "/etc/herald/rules", findRulesDir("", ""))
	require.Equal(t, "flag", findRulesDir("", "flag"))
	require.Equal(t, "arg", findRulesDir("arg", "flag"))
}

func TestDevPortBase(t *testing.T) {
	t.Parallel()
	p, err := newDevPorts(devPortBaseDefault)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7101", p.nodes[0].raft)
	require.Equal(t, "127.0.0.1:8103", p.nodes[2].http)
	require.Equal(t, "127.0.0.1:8180", p.wecom)
	require.Equal(t, "127.0.0.1:8181", p.wecomAdmin)
	p, err = newDevPorts(20000)
	require.NoError(t, err)
	var all []string
	for _, n := range p.nodes {
		all = append(all, n.raft, n.http)
	}
	all = append(all, p.wecom, p.wecomAdmin)
	require.Equal(t, "127.0.0.1:20001 127.0.0.1:21001 127.0.0.1:20002 127.0.0.1:21002 127.0.0.1:20003 127.0.0.1:21003 127.0.0.1:21080 127.0.0.1:21081", strings.Join(all, " "))
	_, err = newDevPorts(65000)
	require.ErrorContains(t, err, "--port-base")
}

// TestDefaultZoneHasAName: without --tz or HERALD_TZ the display zone is the
// machine's by its IANA name (as the nodes name it), so a table's "TIME
// (ZONE)" header never says Go's "Local".
func TestDefaultZoneHasAName(t *testing.T) {
	t.Setenv(tzEnv, "")
	t.Setenv("TZ", "Europe/Berlin")
	root := newRootCmd()
	loc, err := zoneFlag(root)
	require.NoError(t, err)
	require.Equal(t, "Europe/Berlin", loc.String())

	t.Setenv("TZ", "")
	loc, err = zoneFlag(root)
	require.NoError(t, err)
	if name, ok := machineZone(); ok {
		require.NotEqual(t, "Local", loc.String())
		require.Equal(t, name, loc.String())
	} else { // /etc/localtime is a copy, not a link: its name is unknown
		require.Equal(t, time.Local, loc)
	}
}
