package api_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// benchDay fills a state with a day of 100,000 deliveries (sent with
// spread-out latencies, 1% failed) in ten runs, and its API.
func benchDay(b *testing.B) http.Handler {
	n := enginetest.New()
	slot := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 1))
	const runs, perRun = 10, 10000
	for r := range runs {
		at := slot.Add(time.Duration(r) * time.Hour)
		key := engine.RunKey(fmt.Sprintf("rule%d", r%3), at)
		n.MustApply(b, engine.CmdStartRun, engine.StartRun{Key: key, Rule: fmt.Sprintf("rule%d", r%3), Slot: at, Zone: "Asia/Shanghai", Date: "2026-12-01", Now: at})
		ids := make([]string, 0, perRun)
		for c := range perRun / 1000 {
			nds := make([]engine.NewDelivery, 1000)
			for i := range nds {
				who := fmt.Sprintf("u%05d", c*1000+i)
				nds[i] = engine.NewDelivery{ID: engine.DeliveryID(key, who), Recipient: who, Channel: "wecom_sales", NotBefore: at,
					Deadline: at.Add(2 * time.Hour), Payload: json.RawMessage(`{"msgtype":"markdown","content":"**2026-12-01 日报** 请于今天 18:00 前提交"}`)}
				ids = append(ids, nds[i].ID)
			}
			n.MustApply(b, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: nds})
		}
		n.MustApply(b, engine.CmdFinishPlan, engine.FinishPlan{RunKey: key, Now: at})
		for c := 0; c < len(ids); c += 1000 {
			cl := n.MustApply(b, engine.CmdClaim, engine.ClaimDeliveries{IDs: ids[c : c+1000], Leader: "n1", Now: at, Timeout: time.Hour}).(engine.ClaimResult)
			res := make([]engine.Settlement, len(cl.Claimed))
			for i, x := range cl.Claimed {
				res[i] = engine.Settlement{ID: x.ID, Seq: x.Seq, Status: heraldtype.StatusSent}
				if rng.IntN(100) == 0 {
					res[i].Status, res[i].Code, res[i].Error = heraldtype.StatusPermanent, "81013", "user not found"
				}
			}
			n.MustApply(b, engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: at.Add(time.Duration(rng.IntN(600_000)) * time.Millisecond), Results: res})
		}
	}
	return api.New(api.Config{Hosts: testHosts, FSM: n.FSM, Replicator: n, NowFunc: func() time.Time { return slot.Add(12 * time.Hour) },
		StatusFunc: func() api.Status { return api.Status{NodeID: "n1"} }})
}

// BenchmarkDashboardRequests answers each request the dashboard makes in
// one poll, with 100,000 deliveries in the day (the target: each under
// 200 ms):
//
//	go test ./engine/api -run '^$' -bench DashboardRequests -benchtime 20x
func BenchmarkDashboardRequests(b *testing.B) {
	h := benchDay(b)
	for _, target := range []string{
		"/v1/status", "/v1/alerts", "/v1/runs?limit=50", "/v1/deliveries?limit=100", "/v1/tasks?state=pending&limit=50",
		"/v1/stats?date=2026-12-01", "/v1/deliveries?recipient=u04242&date=2026-12-01&limit=1000", "/ui/", "/ui/app.js",
	} {
		b.Run(target, func(b *testing.B) {
			var worst time.Duration
			for b.Loop() {
				start := time.Now()
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", target, w.Code, w.Body.String())
				}
				worst = max(worst, time.Since(start))
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
		})
	}
}
