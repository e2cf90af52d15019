package api

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/engine"
)

// collector exports the replicated delivery statistics as Prometheus
// metrics, read from the local state at scrape time: every node reports
// the same numbers, whichever leads.
type collector struct {
	fsm *engine.FSM

	deliveries, pending, failures, runs *prometheus.Desc
	slotToSent, lateness, success       *prometheus.Desc
	tasks, alerts                       *prometheus.Desc
	fsmVersion, directory               *prometheus.Desc
}

func newCollector(fsm *engine.FSM) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &collector{
		fsm:        fsm,
		deliveries: d("herald_deliveries_total", "Deliveries that ended, by rule and outcome (sent, failed, expired, cancelled).", "rule", "outcome"),
		pending:    d("herald_deliveries_pending", "Deliveries planned and not ended yet, by rule.", "rule"),
		failures:   d("herald_delivery_failures_total", "Failed and expired deliveries by rule and reason (the provider's code, expired, or error; /v1/stats has the words).", "rule", "reason"),
		runs:       d("herald_runs_total", "Runs started, by rule and kind (all, late, skipped).", "rule", "kind"),
		slotToSent: d("herald_slot_to_sent_seconds", "Time from a run's slot to the channel's acceptance.", "rule"),
		lateness:   d("herald_send_lateness_seconds", "Time from a delivery's planned time (slot + stagger) to sent.", "rule"),
		success:    d("herald_send_success_ratio", "Sent over sent, failed and expired, by rule, over the retained days.", "rule"),
		tasks:      d("herald_tasks_pending", "API tasks waiting for their due time."),
		alerts:     d("herald_alerts_open", "Alerts not acknowledged."),
		directory:  d("herald_directory_people", "People in the WeCom directory snapshot in force (state in_force) and in a refresh held for confirmation (state held).", "state"),
		fsmVersion: d("herald_fsm_version", "The replicated-log (FSM) version each member's build applies, as recorded by the leader; a rolling upgrade is done when all are equal.", "member"),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.deliveries, c.pending, c.failures, c.runs, c.slotToSent, c.lateness, c.success, c.tasks, c.alerts, c.fsmVersion, c.directory} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	byRule := map[string]*engine.DayStats{}
	for _, day := range c.fsm.AllDayStats() {
		for rule, s := range day {
			if byRule[rule] == nil {
				byRule[rule] = &engine.DayStats{}
			}
			byRule[rule] = addCounters(byRule[rule], s)
		}
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	for rule, s := range byRule {
		counter(c.deliveries, float64(s.Sent), rule, "sent")
		counter(c.deliveries, float64(s.Failed), rule, "failed")
		counter(c.deliveries, float64(s.Expired), rule, "expired")
		counter(c.deliveries, float64(s.Cancelled), rule, "cancelled")
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(s.Pending()), rule)
		reasons := map[string]int{}
		for reason, n := range s.Reasons {
			reasons[metricReason(reason)] += n
		}
		for reason, n := range reasons {
			counter(c.failures, float64(n), rule, reason)
		}
		counter(c.runs, float64(s.Runs), rule, "all")
		counter(c.runs, float64(s.Late), rule, "late")
		counter(c.runs, float64(s.Skipped), rule, "skipped")
		ch <- histogram(c.slotToSent, s.SlotToSent, s.SlotToSentSum.Seconds(), rule)
		ch <- histogram(c.lateness, s.Lateness, s.LatenessSum.Seconds(), rule)
		ratio := 1.0
		if ended := s.Sent + s.Failed + s.Expired; ended > 0 {
			ratio = float64(s.Sent) / float64(ended)
		}
		ch <- prometheus.MustNewConstMetric(c.success, prometheus.GaugeValue, ratio, rule)
	}
	tasks, alerts := c.fsm.Counts()
	ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(tasks))
	ch <- prometheus.MustNewConstMetric(c.alerts, prometheus.GaugeValue, float64(alerts))
	if cur, held := c.fsm.Directory(); cur != nil || held != nil {
		var nCur, nHeld float64
		if cur != nil {
			nCur = float64(len(cur.UserIDs))
		}
		if held != nil {
			nHeld = float64(len(held.UserIDs))
		}
		ch <- prometheus.MustNewConstMetric(c.directory, prometheus.GaugeValue, nCur, "in_force")
		ch <- prometheus.MustNewConstMetric(c.directory, prometheus.GaugeValue, nHeld, "held")
	}
	for _, m := range c.fsm.Members() {
		ch <- prometheus.MustNewConstMetric(c.fsmVersion, prometheus.GaugeValue, float64(m.AppliesFSM()), m.ID)
	}
}

// metricReason keeps a failure reason's label to a bounded set: the
// provider's code, "expired", the engine's "other", or "error" for free
// text. Free text can hold a recipient or a port, and daily aggregates are
// never pruned, so as a label it would add series for ever; /v1/stats
// keeps the words.
func metricReason(reason string) string {
	if reason == "expired" || reason == "other" || strings.HasPrefix(reason, "code ") {
		return reason
	}
	return "error"
}

// histogram turns per-bucket counts into a Prometheus histogram.
func histogram(d *prometheus.Desc, hist []uint64, sum float64, rule string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(engine.LatencyBuckets))
	var cum, count uint64
	for i, b := range engine.LatencyBuckets {
		if i < len(hist) {
			cum += hist[i]
		}
		buckets[b.Seconds()] = cum
	}
	for _, n := range hist {
		count += n
	}
	return prometheus.MustNewConstHistogram(d, count, sum, buckets, rule)
}
