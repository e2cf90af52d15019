package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
)

func TestAlertsCmd(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)

	out, err := runHerald(t, "alerts", "--addr", addr)
	require.NoError(t, err)
	require.Equal(t, "no open alerts\n", out)
	out, err = runHerald(t, "alerts", "--addr", addr, "--json")
	require.NoError(t, err)
	require.Equal(t, "[]\n", out, "an empty list, not null")

	raise := func(cause, rule, msg string, at time.Time) string {
		node.apply(t, engine.CmdRaiseAlert, engine.RaiseAlert{Cause: cause, Rule: rule, Message: msg, Now: at})
		return engine.AlertID(cause)
	}
	failed := raise("delivery-failed:daily_report", "daily_report", "errcode 60020: not allow to access from your ip", cliNow)
	skipped := raise("skipped:weekly_report", "weekly_report", "slot skipped beyond catch-up", cliNow.Add(time.Minute))
	raise("delivery-failed:daily_report", "daily_report", "errcode 60020: not allow to access from your ip", cliNow.Add(2*time.Minute))

	// Newest first; the repeated cause counted on one line.
	for _, args := range [][]string{{"alerts"}, {"alerts", "list"}} {
		out, err = runHerald(t, append(args, "--addr", addr)...)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 3, out)
		require.Regexp(t, `^ID\s+LAST\s+COUNT\s+ACKED\s+RULE\s+MESSAGE$`, lines[0])
		require.Regexp(t, `^`+failed+`\s+`+regexp.QuoteMeta(engine.ShowTime(cliNow.Add(2*time.Minute), time.Local))+`\s+2\s+false\s+daily_report\s+errcode 60020: not allow to access from your ip$`, lines[1])
		require.Regexp(t, `^`+skipped+`\s+`+regexp.QuoteMeta(engine.ShowTime(cliNow.Add(time.Minute), time.Local))+`\s+1\s+false\s+weekly_report\s+slot skipped beyond catch-up$`, lines[2])
	}

	// By a prefix, as list prints it: the answer names the whole id.
	out, err = runHerald(t, "alerts", "ack", failed[:8], "--addr", addr)
	require.NoError(t, err)
	require.Equal(t, "alert "+failed+" acknowledged\n", out)
	al, _ := node.FSM.Alert(failed)
	require.True(t, al.Acked)

	// Open alerts only, unless --all (on either spelling of list).
	ids := func(args ...string) []string {
		t.Helper()
		out, err := runHerald(t, append(args, "--addr", addr, "--json")...)
		require.NoError(t, err)
		var alerts []engine.Alert
		require.NoError(t, json.Unmarshal([]byte(out), &alerts))
		var got []string
		for _, a := range alerts {
			got = append(got, a.ID)
		}
		return got
	}
	require.Equal(t, []string{skipped}, ids("alerts"))
	require.Equal(t, []string{skipped}, ids("alerts", "list"))
	require.Equal(t, []string{failed, skipped}, ids("alerts", "--all"))
	require.Equal(t, []string{failed, skipped}, ids("alerts", "list", "--all"))
	out, err = runHerald(t, "alerts", "--all", "--addr", addr)
	require.NoError(t, err)
	require.Regexp(t, failed+`\s+\S+ \S+ \S+\s+2\s+true\s+daily_report`, out)

	_, err = runHerald(t, "alerts", "ack", skipped, "--addr", addr)
	require.NoError(t, err)
	out, err = runHerald(t, "alerts", "--addr", addr)
	require.NoError(t, err)
	require.Equal(t, "no open alerts\n", out)
	out, err = runHerald(t, "alerts", "--addr", addr, "--json")
	require.NoError(t, err)
	require.Equal(t, "[]\n", out, "an empty list, not null")

	_, err = runHerald(t, "alerts", "ack", "nope", "--addr", addr)
	require.ErrorContains(t, err, `no alert "nope" (HTTP 404)`)
	_, err = runHerald(t, "alerts", "ack", "--addr", addr)
	require.ErrorContains(t, err, "accepts 1 arg(s), received 0")
}

func TestRulesFireCmd(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)

	out, err := runHerald(t, "rules", "fire", "daily_report", "--addr", addr, "--tz", "Asia/Shanghai", "--slot", "2026-11-30 09:00")
	require.NoError(t, err)
	require.Equal(t, "fired daily_report slot 2026-11-30 09:00:00 +08:00: run daily_report@2026-11-30T01:00:00Z\n", out)
	run, ok := node.FSM.Run("daily_report@2026-11-30T01:00:00Z")
	require.True(t, ok)
	require.True(t, run.Manual)
	require.Equal(t, "Asia/Shanghai", run.Zone)

	// A slot fires once, however it is written.
	_, err = runHerald(t, "rules", "fire", "daily_report", "--addr", addr, "--slot", "2026-11-30T01:00:00Z")
	require.ErrorContains(t, err, "slot 2026-11-30T01:00:00Z of rule daily_report already fired (run daily_report@2026-11-30T01:00:00Z, ")
	require.ErrorContains(t, err, "(HTTP 409)")

	// Without --slot: now (the node's clock), to the second.
	out, err = runHerald(t, "rules", "fire", "daily_report", "--addr", addr, "--json")
	require.NoError(t, err)
	var res api.FireResponse
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, engine.RunKey("daily_report", cliNow), res.Run)
	require.True(t, res.Slot.Equal(cliNow))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"enquiry_timeout"}, "rule: rule enquiry_timeout has no schedule: it fires by API tasks (POST /v1/tasks) (HTTP 400)"},
		{[]string{"nope"}, `no rule named "nope" is loaded (HTTP 404)`},
		{[]string{"daily_report", "--slot", "2026-12-02T09:00:00+08:00"}, "slot: is in the future; the scheduler fires it on time (HTTP 400)"},
		{[]string{"daily_report", "--slot", "monday"}, `--slot: "monday" is not a time`},
		{[]string{}, "accepts 1 arg(s), received 0"},
	} {
		_, err := runHerald(t, append([]string{"rules", "fire", "--addr", addr}, tc.args...)...)
		require.ErrorContains(t, err, tc.want, tc.args)
	}
}

// TestAPICmdsUnreachable: every command that talks to a node says so
// plainly when nothing answers, at once (only a 503 is retried).
func TestAPICmdsUnreachable(t *testing.T) {
	t.Parallel()
	addr := deadAddr(t)
	for _, args := range [][]string{
		{"task", "submit", "k", "--rule", "enquiry_timeout", "--in", "5m"},
		{"task", "get", "k"},
		{"task", "cancel", "k"},
		{"task", "list"},
		{"alerts"},
		{"alerts", "list", "--all"},
		{"alerts", "ack", "x"},
		{"rules", "fire", "daily_report"},
	} {
		start := time.Now()
		_, err := runHerald(t, append(args, "--addr", addr)...)
		require.ErrorContains(t, err, "no Herald node at "+addr+": connection refused", args)
		require.Less(t, time.Since(start), 10*time.Second, args)
	}
}
