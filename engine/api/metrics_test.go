package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// The failure reasons kept per rule and day include free text (a
// transport error with a port, a recipient the channel refused). Daily
// aggregates are never pruned, so as labels they would add series every
// day, for ever.
func TestMetricsFailureReasonsAreLowCardinality(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	apply := func(ct engine.CommandType, body any) any { return b.apply(t, ct, body) }
	const days = 30
	for i := range days {
		slot := now0.AddDate(0, 0, -days+i)
		key := engine.RunKey("daily", slot)
		require.Nil(t, apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: "daily", Slot: slot, Zone: "Asia/Shanghai",
			Date: engine.SlotDate(slot, "Asia/Shanghai"), Now: slot}))
		var nds []engine.NewDelivery
		var ids []string
		for _, to := range []string{fmt.Sprintf("u%d|boss", i), "zhangsan", "lisi"} {
			id := engine.DeliveryID(key, to)
			ids = append(ids, id)
			nds = append(nds, engine.NewDelivery{ID: id, Recipient: to, Channel: "wecom", NotBefore: slot, Deadline: slot.Add(time.Hour)})
		}
		apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: nds})
		c := apply(engine.CmdClaim, engine.ClaimDeliveries{IDs: ids, Leader: "n1", Now: slot, Timeout: time.Minute}).(engine.ClaimResult)
		require.Len(t, c.Claimed, 3)
		apply(engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: slot.Add(time.Second), Results: []engine.Settlement{
			{ID: ids[0], Seq: c.Claimed[0].Seq, Status: heraldtype.StatusPermanent, Error: fmt.Sprintf("wecom: recipient %q is not a single userid", nds[0].Recipient)},
			{ID: ids[1], Seq: c.Claimed[1].Seq, Status: heraldtype.StatusPermanent, Code: "81013", Error: "user not found"},
			{ID: ids[2], Seq: c.Claimed[2].Seq, Status: heraldtype.StatusSent},
		}})
	}
	// /v1/stats keeps the day's reasons word for word.
	code, out := b.do(t, http.MethodGet, "/v1/stats?date="+engine.SlotDate(now0.AddDate(0, 0, -1), "Asia/Shanghai"), "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, out["total"].(map[string]any)["failures"], `wecom: recipient "u29|boss" is not a single userid`)

	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var series []string
	for line := range strings.Lines(rec.Body.String()) {
		if strings.HasPrefix(line, "herald_delivery_failures_total{") {
			series = append(series, strings.TrimSpace(line))
		}
	}
	require.ElementsMatch(t, []string{
		`herald_delivery_failures_total{reason="code 81013",rule="daily"} 30`,
		`herald_delivery_failures_total{reason="error",rule="daily"} 30`,
	}, series)
	require.NotContains(t, rec.Body.String(), "boss", "no recipient in a label")
}
