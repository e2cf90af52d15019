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
	Rule    string `json:"rule"`
	Runs    int    `json:"runs"`
	Late    int    `json:"late_runs"`
	Skipped int    `json:"skipped_runs"`
	// Paused: slots that came while the rule was paused; Backfilled:
	// skipped or paused slots fired by hand after all; Nobody: runs (tasks
	// and fires included) whose rule planned no recipient — done, but no
	// one was told; Retried: deliveries sent again by hand.
	Paused     int     `json:"paused_runs"`
	Backfilled int     `json:"backfilled_runs"`
	Nobody     int     `json:"planned_nobody_runs"`
	Retried    int     `json:"retried"`
	Planned    int     `json:"planned"`
	Pending    int     `json:"pending"`
	Sent       int     `json:"sent"`
	Failed     int     `json:"failed"`
	Expired    int     `json:"expired"`
	Cancelled  int     `json:"cancelled"`
	Success    float64 `json:"success_rate"` // sent / (sent + failed + expired); 1 with none ended
	// Seconds from slot to sent: average and 95th percentile, from the
	// recorded times (see SlotToSent.Precise).
	SlotToSentAvg float64 `json:"slot_to_sent_avg_seconds"`
	SlotToSentP95 float64 `json:"slot_to_sent_p95_seconds"`
	// Lateness histogram: sent minus planned time (slot + stagger), per
	// bucket upper bound in seconds ("+Inf" for the last).
	Lateness map[string]uint64 `json:"lateness_histogram"`
	Failures map[string]int    `json:"failures,omitempty"`

	// SlotToSent and LatenessTimes describe the two delays in full.
	SlotToSent    Durations `json:"slot_to_sent"`
	LatenessTimes Durations `json:"lateness"`
	// Minutes is what ended in each minute, ascending (only minutes with
	// something in them).
	Minutes []MinuteStats `json:"minutes"`

	// The rule as loaded now; empty for a rule no longer loaded.
	Schedule string `json:"schedule,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// TasksDue counts this rule's API tasks still waiting, due on the date
	// (in the rule's zone): work to come that no delivery shows yet.
	TasksDue int `json:"tasks_due"`
	// ExpectedSlots counts the schedule's slots on the date, up to now
	// less a minute's grace; MissedSlots lists those that did not fire as
	// they should (no run, or a run skipped or failed), oldest first, at
	// most maxMissedShown of MissedCount.
	ExpectedSlots int          `json:"expected_slots"`
	MissedCount   int          `json:"missed_count"`
	MissedSlots   []MissedSlot `json:"missed_slots,omitempty"`
}

// Durations summarises a day's delays (seconds).
type Durations struct {
	Count uint64  `json:"count"`
	Avg   float64 `json:"avg_seconds"`
	P50   float64 `json:"p50_seconds"`
	P90   float64 `json:"p90_seconds"`
	P95   float64 `json:"p95_seconds"`
	P99   float64 `json:"p99_seconds"`
	Max   float64 `json:"max_seconds"`
	// Precise is true when the percentiles come from the recorded times,
	// within Precision (relative); false when the day was recorded by an
	// older build and they are estimated from coarse buckets.
	Precise   bool         `json:"precise"`
	Precision float64      `json:"precision"`
	Histogram []HistBucket `json:"histogram"`
}

// HistBucket is one bar of a Durations histogram: values in [From, To).
type HistBucket struct {
	From  float64  `json:"from_seconds"`
	To    *float64 `json:"to_seconds"` // null: no upper bound
	Count uint64   `json:"count"`
}

// MinuteStats is what ended in one minute.
type MinuteStats struct {
	At      time.Time `json:"at"`
	Sent    uint32    `json:"sent"`
	Failed  uint32    `json:"failed"`
	Expired uint32    `json:"expired"`
}

// MissedSlot is a slot that should have fired and did not go out.
type MissedSlot struct {
	Slot time.Time `json:"slot"`
	// State is "missing" (no run at all), or the run's state (skipped,
	// failed, or another that is not planned).
	State string `json:"state"`
	Run   string `json:"run"`
}

// Stats is the body of GET /v1/stats.
type Stats struct {
	Date string `json:"date"`
	// Rules are the rules with something on the date: runs, API tasks due,
	// or slots that should have fired.
	Rules []RuleStats `json:"rules"`
	Total RuleStats   `json:"total"`
	// Upcoming lists every scheduled rule loaded here with its next slots
	// after now (whatever the date asked).
	Upcoming []Upcoming `json:"upcoming"`
}

// Upcoming is a scheduled rule's next slots.
type Upcoming struct {
	Rule      string      `json:"rule"`
	Schedule  string      `json:"schedule"`
	Timezone  string      `json:"timezone"`
	NextFires []time.Time `json:"next_fires"`
	Error     string      `json:"error,omitempty"` // the schedule does not build
}

// histBounds are the bars of the lateness charts, in seconds: fine at the
// bottom, where a healthy day lives.
var histBounds = []float64{0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

func (s *server) stats(w http.ResponseWriter, r *http.Request) {
	if !onlyParams(w, r, "date") {
		return
	}
	date := r.URL.Query().Get("date")
	if date == "" {
		date = s.now().In(s.displayZone()).Format(time.DateOnly)
	} else if _, err := time.Parse(time.DateOnly, date); err != nil {
		writeFieldError(w, &FieldError{"date", "want a date like 2026-12-01"})
		return
	}
	writeJSON(w, http.StatusOK, s.dayStats(date, s.now()))
}

// dayStats builds GET /v1/stats for date: the replicated aggregates, and,
// for the rules loaded here, what their schedules and tasks say.
func (s *server) dayStats(date string, now time.Time) Stats {
	day := s.cfg.FSM.DayStats(date)
	out := Stats{Date: date, Rules: []RuleStats{}, Upcoming: []Upcoming{}}
	loaded := map[string]engine.Rule{}
	if s.cfg.Rules != nil {
		for _, r := range s.cfg.Rules.Rules() {
			loaded[r.Name] = r
		}
	}
	names := slices.Sorted(maps.Keys(day))
	for name := range loaded {
		if _, ok := day[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	nobody := map[string]int{}
	for _, run := range s.cfg.FSM.Runs(func(r *engine.Run) bool { return r.State == engine.RunPlanned && r.Planned == 0 }) {
		if run.Day() == date {
			nobody[run.Rule]++
		}
	}
	total := &engine.DayStats{}
	for _, name := range names {
		d := day[name]
		if d == nil {
			d = &engine.DayStats{}
		}
		rs := ruleStats(name, d)
		rs.Nobody = nobody[name]
		if rule, ok := loaded[name]; ok {
			s.addSchedule(&rs, rule, date, now)
			if rule.Schedule != "" {
				out.Upcoming = append(out.Upcoming, s.upcoming(rule, now))
			}
		}
		if day[name] == nil && rs.ExpectedSlots == 0 && rs.TasksDue == 0 {
			continue // loaded, and nothing on this date
		}
		out.Rules = append(out.Rules, rs)
		total = addStats(total, d)
	}
	out.Total = ruleStats("", total)
	for _, rs := range out.Rules {
		out.Total.Nobody += rs.Nobody
		out.Total.TasksDue += rs.TasksDue
		out.Total.ExpectedSlots += rs.ExpectedSlots
		out.Total.MissedCount += rs.MissedCount
	}
	return out
}

func ruleStats(name string, d *engine.DayStats) RuleStats {
	rs := RuleStats{Rule: name, Runs: d.Runs, Late: d.Late, Skipped: d.Skipped, Planned: d.Planned, Pending: d.Pending(),
		Sent: d.Sent, Failed: d.Failed, Expired: d.Expired, Cancelled: d.Cancelled, Success: 1,
		Paused: d.Paused, Backfilled: d.Backfilled, Retried: d.Retried,
		Lateness: map[string]uint64{}, Failures: d.Reasons, Minutes: []MinuteStats{}}
	if ended := d.Sent + d.Failed + d.Expired; ended > 0 {
		rs.Success = float64(d.Sent) / float64(ended)
	}
	rs.SlotToSent = durations(d.Sent, d.SlotToSentSketch, d.SlotToSent, d.SlotToSentSum)
	rs.LatenessTimes = durations(d.Sent, d.LatenessSketch, d.Lateness, d.LatenessSum)
	rs.SlotToSentAvg, rs.SlotToSentP95 = rs.SlotToSent.Avg, rs.SlotToSent.P95
	for i, n := range d.Lateness {
		rs.Lateness[bucketName(i)] = n
	}
	for _, m := range d.Minutes {
		rs.Minutes = append(rs.Minutes, MinuteStats{At: time.Unix(m.Minute*60, 0).UTC(), Sent: m.Sent, Failed: m.Failed, Expired: m.Expired})
	}
	return rs
}

// durations summarises one delay of sent deliveries: from the sketch when
// it saw every send, else (a day begun by an older build) estimated from
// the coarse histogram.
func durations(sent int, sk *engine.Sketch, hist []uint64, sum time.Duration) Durations {
	out := Durations{Histogram: []HistBucket{}}
	if sent <= 0 {
		out.Precise = true
		return out
	}
	out.Count = uint64(sent)
	out.Avg = (sum / time.Duration(sent)).Seconds()
	if sk != nil && sk.Count == uint64(sent) {
		out.Precise, out.Precision = true, engine.SketchPrecision
		out.P50, out.P90 = sk.Quantile(0.5).Seconds(), sk.Quantile(0.9).Seconds()
		out.P95, out.P99 = sk.Quantile(0.95).Seconds(), sk.Quantile(0.99).Seconds()
		out.Max = sk.Max.Seconds()
		var below uint64
		for i, b := range histBounds {
			n := sk.CountBelow(time.Duration(b * float64(time.Second)))
			out.Histogram = append(out.Histogram, HistBucket{From: lowerBound(i), To: &histBounds[i], Count: n - below})
			below = n
		}
		out.Histogram = append(out.Histogram, HistBucket{From: histBounds[len(histBounds)-1], Count: sk.Count - below})
		return out
	}
	out.P50 = engine.Quantile(hist, 0.5).Seconds()
	out.P90 = engine.Quantile(hist, 0.9).Seconds()
	out.P95 = engine.Quantile(hist, 0.95).Seconds()
	out.P99 = engine.Quantile(hist, 0.99).Seconds()
	out.Max = engine.Quantile(hist, 1).Seconds()
	from := 0.0
	for i, n := range hist {
		b := HistBucket{From: from, Count: n}
		if i < len(engine.LatencyBuckets) {
			to := engine.LatencyBuckets[i].Seconds()
			b.To, from = &to, to
		}
		out.Histogram = append(out.Histogram, b)
	}
	return out
}

func lowerBound(i int) float64 {
	if i == 0 {
		return 0
	}
	return histBounds[i-1]
}

func bucketName(i int) string {
	if i >= len(engine.LatencyBuckets) {
		return "+Inf"
	}
	return strconv.FormatFloat(engine.LatencyBuckets[i].Seconds(), 'f', -1, 64)
}

// addStats sums two days' aggregates (histograms bucket by bucket,
// sketches and minute series merged).
func addStats(a, b *engine.DayStats) *engine.DayStats {
	n := addCounters(a, b)
	n.SlotToSentSketch = a.SlotToSentSketch.Merge(b.SlotToSentSketch)
	n.LatenessSketch = a.LatenessSketch.Merge(b.LatenessSketch)
	n.Minutes = addMinutes(a.Minutes, b.Minutes)
	return n
}

// addCounters sums the counters and coarse histograms of two aggregates,
// all that Prometheus reads: summing every day's minutes at each scrape
// would cost more as the days pile up.
func addCounters(a, b *engine.DayStats) *engine.DayStats {
	n := *a
	n.Runs += b.Runs
	n.Late += b.Late
	n.Skipped += b.Skipped
	n.Planned += b.Planned
	n.Sent += b.Sent
	n.Failed += b.Failed
	n.Expired += b.Expired
	n.Cancelled += b.Cancelled
	n.Paused += b.Paused
	n.Backfilled += b.Backfilled
	n.Retried += b.Retried
	n.SlotToSentSum += b.SlotToSentSum
	n.LatenessSum += b.LatenessSum
	n.SlotToSent = addHist(a.SlotToSent, b.SlotToSent)
	n.Lateness = addHist(a.Lateness, b.Lateness)
	n.SlotToSentSketch, n.LatenessSketch, n.Minutes = nil, nil, nil
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

// addMinutes merges two ascending minute series.
func addMinutes(a, b []engine.MinuteCount) []engine.MinuteCount {
	out := make([]engine.MinuteCount, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].Minute < b[j].Minute):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].Minute < a[i].Minute:
			out = append(out, b[j])
			j++
		default:
			m := a[i]
			m.Sent, m.Failed, m.Expired = m.Sent+b[j].Sent, m.Failed+b[j].Failed, m.Expired+b[j].Expired
			out = append(out, m)
			i++
			j++
		}
	}
	return out
}
