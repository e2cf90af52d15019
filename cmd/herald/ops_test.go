package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/rules"
)

func TestRulesPauseResumeCmd(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	out, err := runHerald(t, "rules", "pause", "daily_report", "--reason", "Spring Festival", "--addr", addr, "--tz", "Asia/Shanghai")
	require.NoError(t, err)
	require.Regexp(t, `^rule daily_report paused at 2026-12-01 10:00:00 \+08:00 by loopback: Spring Festival \(note: \S+\)\n$`, out)
	_, ok := node.FSM.Paused("daily_report")
	require.True(t, ok)
	_, err = runHerald(t, "rules", "pause", "daily_report", "--addr", addr)
	require.ErrorContains(t, err, "already paused (HTTP 409)")
	out, err = runHerald(t, "rules", "resume", "daily_report", "--addr", addr)
	require.NoError(t, err)
	require.Equal(t, "rule daily_report resumed\n", out)
	_, err = runHerald(t, "rules", "resume", "daily_report", "--addr", addr)
	require.ErrorContains(t, err, "not paused (HTTP 409)")
}

func TestDeliveriesRetryCmd(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	slot := cliNow.Add(-time.Hour)
	key := engine.RunKey("daily_report", slot)
	node.apply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: "daily_report", Slot: slot, Now: slot})
	id := engine.DeliveryID(key, "alice")
	node.apply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{
		{ID: id, Recipient: "alice", Channel: "mock", NotBefore: slot, Deadline: slot.Add(time.Minute)}}})
	node.apply(t, engine.CmdExpire, engine.Expire{IDs: []string{id}, Now: slot.Add(time.Minute)})

	out, err := runHerald(t, "deliveries", "retry", id[:12], "--deadline", "30m", "--addr", addr, "--tz", "UTC")
	require.NoError(t, err)
	require.Equal(t, "1 retried (new deadline 2026-12-01 02:30:00 +00:00): "+id[:12]+"\n", out)
	d, _ := node.FSM.Delivery(id)
	require.Equal(t, engine.StatePending, d.State)
	require.NotEmpty(t, d.RetriedBy)

	out, err = runHerald(t, "deliveries", "retry", "--rule", "daily_report", "--state", "expired", "--since", "2026-12-01 00:00", "--addr", addr)
	require.NoError(t, err, out)
	require.Contains(t, out, "0 retried")
	_, err = runHerald(t, "deliveries", "retry", "--addr", addr)
	require.ErrorContains(t, err, "give delivery ids")
	_, err = runHerald(t, "deliveries", "retry", id, "--addr", addr)
	require.ErrorContains(t, err, "nothing was retried")

	// A deadline that is not ahead is refused, not swapped for the default.
	for _, d := range []string{"0s", "-1h"} {
		_, err = runHerald(t, "deliveries", "retry", id, "--deadline", d, "--addr", addr)
		require.ErrorContains(t, err, "is not ahead; want a positive duration", d)
	}
}

// TestStatusShowsPausedRulesWithoutFile: a rule paused and then removed
// (or renamed) stays paused cluster wide, so a file that defines it again
// sends nothing; status keeps it listed as paused, with why it has no file,
// so nobody forgets it.
func TestStatusShowsPausedRulesWithoutFile(t *testing.T) {
	t.Parallel()
	at := cliNow
	files := []rules.FileStatus{
		{Kind: rules.KindRule, Name: "daily_report", File: "daily_report.lua", Hash: "h1"},
		{Kind: rules.KindPeople, File: "people.csv", Hash: "h2"},
	}
	pauses := []*engine.Pause{
		{Rule: "daily_report", By: "ops", At: at, Reason: "holiday"},
		{Rule: "old_report", By: "lina", At: at, Reason: "moving"},
	}
	got := ruleStatuses(files, pauses)
	require.Len(t, got, 3)
	require.True(t, got[0].Paused)
	require.Equal(t, "holiday", got[0].Reason)
	require.False(t, got[1].Paused, "a people file")
	require.Equal(t, "old_report", got[2].Name)
	require.True(t, got[2].Paused)
	require.Equal(t, "lina", got[2].PausedBy)
	require.Empty(t, got[2].File, "no file defines it")
	require.Empty(t, got[2].Error, "absent, not broken")
}
