package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

func TestDeliveriesListRecipient(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	slot := cliNow.Add(-time.Hour).Truncate(time.Hour)
	key := engine.RunKey("daily_report", slot)
	date := engine.SlotDate(slot, "Asia/Shanghai")
	node.apply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: "daily_report", Slot: slot, Zone: "Asia/Shanghai", Date: date, Now: slot})
	nd := func(r, text string) engine.NewDelivery {
		return engine.NewDelivery{ID: engine.DeliveryID(key, r), Recipient: r, Channel: "mock", NotBefore: slot, Deadline: slot.Add(2 * time.Hour),
			Payload: json.RawMessage(`{"msgtype":"text","text":{"content":"` + text + `"}}`)}
	}
	node.apply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{
		nd("lina", `李娜，今日日报\n请在 18:00 前提交`), nd("zhangwei", "张伟，今日日报")}})
	id := engine.DeliveryID(key, "lina")
	c := node.apply(t, engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{id}, Leader: "n1", Now: slot, Timeout: time.Minute}).(engine.ClaimResult)
	node.apply(t, engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: slot.Add(time.Second), Results: []engine.Settlement{
		{ID: id, Seq: c.Claimed[0].Seq, Status: heraldtype.StatusRetryable, Code: "-1", Error: "system busy"}}})
	c = node.apply(t, engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{id}, Leader: "n1", Now: slot.Add(2 * time.Minute), Timeout: time.Minute}).(engine.ClaimResult)
	node.apply(t, engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: slot.Add(2*time.Minute + time.Second), Results: []engine.Settlement{
		{ID: id, Seq: c.Claimed[0].Seq, Status: heraldtype.StatusSent}}})

	out, err := runHerald(t, "deliveries", "list", "--addr", addr, "--recipient", "lina", "--date", date)
	require.NoError(t, err)
	require.Contains(t, out, "lina, "+date+": 1 deliveries")
	require.Contains(t, out, "daily_report  SENT  lina  attempts 2")
	require.Contains(t, out, "retryable "+shortTime(slot.Add(time.Second))+" attempt 1: [-1] system busy")
	require.Contains(t, out, "sent      "+shortTime(slot.Add(2*time.Minute+time.Second)))
	require.Contains(t, out, "content   李娜，今日日报\n            请在 18:00 前提交")
	require.NotContains(t, out, "zhangwei")

	out, err = runHerald(t, "deliveries", "list", "--addr", addr, "--recipient", "lina", "--date", "2020-01-01")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, "lina, 2020-01-01: 0 deliveries"), out)

	_, err = runHerald(t, "deliveries", "list", "--addr", addr, "--recipient", "lina", "--date", "yesterday")
	require.ErrorContains(t, err, "want a date like 2026-12-01")

	// Without --date: today where the operator is (--tz), not where the
	// node is. Kiritimati (+14:00) is a day ahead of the node most hours.
	kiri, err := time.LoadLocation("Pacific/Kiritimati")
	require.NoError(t, err)
	today := time.Now().In(kiri).Format(time.DateOnly)
	out, err = runHerald(t, "deliveries", "list", "--addr", addr, "--recipient", "lina", "--tz", "Pacific/Kiritimati")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, "lina, "+today+" (today in Pacific/Kiritimati): "), out)
}
