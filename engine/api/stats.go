package api

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/heraldhq/herald/engine"
)

// RuleStats is one rule's day in GET /v1/stats.
type RuleStats struct {
	Rule      string  `json:"rule"`
	Runs      int     `json:"runs"`
	Late      int     `json:"late_runs"`
	Skipped   int     `json:"skipped_runs"`
	Planned   int     `json:"planned"`
	Pending   int     `json:"pending"`
	Sent      int     `json:"sent"`
	Failed    int     `json:"failed"`
	Expired   int     `json:"expired"`
	Cancelled int     `json:"cancelled"`
	Success   float64 `json:"success_rate"` // sent / (sent + failed + expired); 1 with none ended
	// Seconds from slot to sent: average and 95th percentile (estimated
	// from the histogram).
	SlotToSentAvg float64 `json:"slot_to_sent_avg_seconds"`
	SlotToSentP95 float64 `json:"slot_to_sent_p95_seconds"`
	// Lateness histogram: sent minus planned time (slot + stagger), per
	// bucket upper bound in seconds ("+Inf" for the last).
	Lateness map[string]uint64 `json:"lateness_histogram"`
	Failures map[string]int    `json:"failures,omitempty"`
}

// Stats is the body of GET /v1/stats.
type Stats struct {
	Date  string      `json:"date"`
	Rules []RuleStats `json:"rules"`
	Total RuleStats   `json:"total"`
}

func (s *server) stats(w http.ResponseWriter, r *http.Request) {
	date := r.URL.Query().Get("date")
	if date == "" {
		date = s.now().Format(time.DateOnly)
	} else if _, err := time.Parse(time.DateOnly, date); err != nil {
		writeFieldError(w, &FieldError{"date", "want a date like 2026-12-01"})
		return
	}
	day := s.cfg.FSM.DayStats(date)
	out := Stats{Date: date, Rules: []RuleStats{}}
	total := &engine.DayStats{}
	for _, name := range slices.Sorted(maps.Keys(day)) {
		d := day[name]
		out.Rules = append(out.Rules, ruleStats(name, d))
		total = addStats(total, d)
	}
	out.Total = ruleStats("", total)
	writeJSON(w, http.StatusOK, out)
}

func ruleStats(name string, d *engine.DayStats) RuleStats {
	rs := RuleStats{Rule: name, Runs: d.Runs, Late: d.Late, Skipped: d.Skipped, Planned: d.Planned, Pending: d.Pending(),
		Sent: d.Sent, Failed: d.Failed, Expired: d.Expired, Cancelled: d.Cancelled, Success: 1,
		Lateness: map[string]uint64{}, Failures: d.Reasons}
	if ended := d.Sent + d.Failed + d.Expired; ended > 0 {
		rs.Success = float64(d.Sent) / float64(ended)
	}
	if d.Sent > 0 {
		rs.SlotToSentAvg = (d.SlotToSentSum / time.Duration(d.Sent)).Seconds()
		rs.SlotToSentP95 = engine.Quantile(d.SlotToSent, 0.95).Seconds()
	}
	for i, n := range d.Lateness {
		rs.Lateness[bucketName(i)] = n
	}
	return rs
}

func bucketName(i int) string {
	if i >= len(engine.LatencyBuckets) {
		return "+Inf"
	}
	return strconv.FormatFloat(engine.LatencyBuckets[i].Seconds(), 'f', -1, 64)
}

// addStats sums two days' aggregates (histograms bucket by bucket).
func addStats(a, b *engine.DayStats) *engine.DayStats {
	n := *a
	n.Runs += b.Runs
	n.Late += b.Late
	n.Skipped += b.Skipped
	n.Planned += b.Planned
	n.Sent += b.Sent
	n.Failed += b.Failed
	n.Expired += b.Expired
	n.Cancelled += b.Cancelled
	n.SlotToSentSum += b.SlotToSentSum
	n.LatenessSum += b.LatenessSum
	n.SlotToSent = addHist(a.SlotToSent, b.SlotToSent)
	n.Lateness = addHist(a.Lateness, b.Lateness)
	n.Reasons = maps.Clone(a.Reasons)
	for k, v := range b.Reasons {
		if n.Reasons == nil {
			n.Reasons = map[string]int{}
		}
		n.Reasons[k] += v
	}
	return &n
}

func addHist(a, b []uint64) []uint64 {
	out := make([]uint64, max(len(a), len(b)))
	for i := range out {
		if i < len(a) {
			out[i] += a[i]
		}
		if i < len(b) {
			out[i] += b[i]
		}
	}
	return out
}
