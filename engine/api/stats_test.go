package api_test

import (
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// The lateness histogram is keyed by each bucket's upper bound in seconds,
// as Prometheus's le, not by Go duration strings ("1m0s").
func TestStatsLatenessHistogramInSeconds(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	apply := func(ct engine.CommandType, body any) any { return b.apply(t, ct, body) }
	slot := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	key := engine.RunKey("daily", slot)
	apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: "daily", Slot: slot, Zone: "Asia/Shanghai", Date: "2026-11-30", Now: slot})
	apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: []engine.NewDelivery{
		{ID: "d1", Recipient: "zhangsan", Channel: "mock", NotBefore: slot, Deadline: slot.Add(time.Hour)}}})
	c := apply(engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{"d1"}, Leader: "n1", Now: slot, Timeout: time.Minute}).(engine.ClaimResult)
	apply(engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: slot.Add(90 * time.Second), Results: []engine.Settlement{
		{ID: "d1", Seq: c.Claimed[0].Seq, Status: heraldtype.StatusSent}}})

	code, out := b.do(t, http.MethodGet, "/v1/stats?date=2026-11-30", "")
	require.Equal(t, http.StatusOK, code)
	daily := out["rules"].([]any)[0].(map[string]any)
	hist := daily["lateness_histogram"].(map[string]any)
	require.ElementsMatch(t, []string{"1", "5", "10", "30", "60", "120", "300", "600", "1800", "3600", "7200", "+Inf"}, slices.Collect(maps.Keys(hist)))
	require.Equal(t, float64(1), hist["120"], "sent 90 s after its time")
	require.Equal(t, float64(90), daily["slot_to_sent_avg_seconds"])
}
