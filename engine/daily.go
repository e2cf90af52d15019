package engine

import (
	"maps"
	"slices"
	"time"
)

// LatencyBuckets are the upper bounds of the slot-to-sent and lateness
// histograms kept in DayStats (the last bucket, past the final bound, is
// implicit).
var LatencyBuckets = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute,
	30 * time.Minute, time.Hour, 2 * time.Hour,
}

// maxReasons bounds the distinct failure reasons kept per rule and day;
// the rest are counted under "other".
const maxReasons = 20

// DayStats aggregates one rule's deliveries of one date (the slot's date
// in the rule's zone). Apply keeps them as deliveries are planned and end,
// so they outlive the deliveries that retention prunes. Immutable once
// stored, like every record.
type DayStats struct {
	Runs      int `json:"runs"`
	Late      int `json:"late"`
	Skipped   int `json:"skipped"`
	Planned   int `json:"planned"`
	Sent      int `json:"sent"`
	Failed    int `json:"failed"`
	Expired   int `json:"expired"`
	Cancelled int `json:"cancelled"`
	// Paused counts slots that came while the rule was paused; Backfilled
	// the skipped or paused slots fired by hand after all; Retried the
	// deliveries sent again by hand (each no longer counted failed or
	// expired until it ends again).
	Paused     int `json:"paused,omitempty"`
	Backfilled int `json:"backfilled,omitempty"`
	Retried    int `json:"retried,omitempty"`
	// SlotToSent: time from the run's slot to the channel's acceptance.
	SlotToSentSum time.Duration `json:"slot_to_sent_sum"`
	SlotToSent    []uint64      `json:"slot_to_sent"` // per LatencyBuckets, plus one past the last
	// Lateness: time from a delivery's planned time (slot + stagger) to sent.
	LatenessSum time.Duration  `json:"lateness_sum"`
	Lateness    []uint64       `json:"lateness"`
	Reasons     map[string]int `json:"reasons,omitempty"` // failures and expiries by reason

	// The same two times, precisely (see Sketch). Nil in aggregates
	// written by a build that did not keep them; a sketch whose Count is
	// below Sent began after some sends (a snapshot from such a build):
	// readers then fall back to the histograms, and say so.
	SlotToSentSketch *Sketch `json:"slot_to_sent_sketch,omitempty"`
	LatenessSketch   *Sketch `json:"lateness_sketch,omitempty"`
	// Minutes counts what ended in each minute (by the leader's clock),
	// ascending: the day's sends and failures over time.
	Minutes []MinuteCount `json:"minutes,omitempty"`
}

// MinuteCount is what ended in one minute of a rule's day.
type MinuteCount struct {
	Minute  int64  `json:"minute"` // Unix time / 60
	Sent    uint32 `json:"sent"`
	Failed  uint32 `json:"failed"`
	Expired uint32 `json:"expired"`
}

// addMinute applies f to the count of the minute of at in ms (added when
// missing), in place: only for a DayStats of this Apply's own.
func addMinute(ms []MinuteCount, at time.Time, f func(*MinuteCount)) []MinuteCount {
	m := at.Unix() / 60
	if at.Unix() < 0 && at.Unix()%60 != 0 {
		m-- // floor, not truncation
	}
	i, found := slices.BinarySearchFunc(ms, m, func(c MinuteCount, m int64) int { return int(c.Minute - m) })
	if !found {
		ms = slices.Insert(ms, i, MinuteCount{Minute: m})
	}
	f(&ms[i])
	return ms
}

// Pending is what is planned and not ended yet.
func (s *DayStats) Pending() int {
	return s.Planned - s.Sent - s.Failed - s.Expired - s.Cancelled
}

// copy is a deep copy of s, which the caller may then change in place.
func (s *DayStats) copy() *DayStats {
	n := *s
	n.SlotToSent = slices.Clone(s.SlotToSent)
	n.Lateness = slices.Clone(s.Lateness)
	n.Reasons = maps.Clone(s.Reasons)
	n.SlotToSentSketch = s.SlotToSentSketch.clone()
	n.LatenessSketch = s.LatenessSketch.clone()
	n.Minutes = slices.Clone(s.Minutes)
	if n.SlotToSent == nil {
		n.SlotToSent = make([]uint64, len(LatencyBuckets)+1)
		n.Lateness = make([]uint64, len(LatencyBuckets)+1)
	}
	return &n
}

func bucketOf(d time.Duration) int {
	i, _ := slices.BinarySearch(LatencyBuckets, d)
	return i
}

// dayBatch is the day aggregates one Apply copied: its own until the Apply
// returns (no snapshot can share them before), so the entry's later
// deliveries update them in place. An entry of 1,000 results copies its
// day once, not 1,000 times.
type dayBatch map[*DayStats]bool

// dayStats updates the aggregate of (date, rule) with f, copy on write
// (once per Apply, see dayBatch).
func (a applier) dayStats(date, rule string, f func(*DayStats)) {
	m := a.st.Daily[date]
	if m == nil {
		m = map[string]*DayStats{}
		a.st.Daily[date] = m
	}
	old := m[rule]
	if old != nil && a.fresh[old] {
		f(old)
		return
	}
	if old == nil {
		old = &DayStats{}
	}
	n := old.copy()
	f(n)
	m[rule] = n
	a.fresh[n] = true
}

// runDate is the aggregate date of a delivery's run.
func (a applier) runDate(d *Delivery) string { return a.st.deliveryDate(d) }

// count adds a delivery that just reached a final state to its day.
func (a applier) count(d *Delivery) {
	a.dayStats(a.runDate(d), d.Rule, func(s *DayStats) {
		switch d.State {
		case StateSent:
			s.Sent++
			lat := max(d.SentAt.Sub(d.Slot), 0)
			s.SlotToSentSum += lat
			s.SlotToSent[bucketOf(lat)]++
			late := max(d.SentAt.Sub(d.NotBefore), 0)
			s.LatenessSum += late
			s.Lateness[bucketOf(late)]++
			s.SlotToSentSketch = s.SlotToSentSketch.add(lat)
			s.LatenessSketch = s.LatenessSketch.add(late)
			s.Minutes = addMinute(s.Minutes, d.SentAt, func(m *MinuteCount) { m.Sent++ })
		case StateFailed, StateExpired:
			if d.State == StateFailed {
				s.Failed++
				s.Minutes = addMinute(s.Minutes, d.EndedAt, func(m *MinuteCount) { m.Failed++ })
			} else {
				s.Expired++
				s.Minutes = addMinute(s.Minutes, d.EndedAt, func(m *MinuteCount) { m.Expired++ })
			}
			if s.Reasons == nil {
				s.Reasons = map[string]int{}
			}
			r := failureReason(d)
			if _, ok := s.Reasons[r]; !ok && len(s.Reasons) >= maxReasons {
				r = "other"
			}
			s.Reasons[r]++
		case StateCancelled:
			s.Cancelled++
		}
	})
}

// failureReason is a short, low-cardinality reason for a failed delivery:
// the provider's code when there is one, else the start of the error.
func failureReason(d *Delivery) string {
	if d.State == StateExpired {
		return "expired"
	}
	if d.Code != "" {
		return "code " + d.Code
	}
	r := []rune(d.LastError)
	if len(r) > 60 {
		r = append(r[:60], '…')
	}
	if len(r) == 0 {
		return "unknown"
	}
	return string(r)
}

// DayStats returns the aggregates of date (YYYY-MM-DD), by rule.
func (f *FSM) DayStats(date string) map[string]*DayStats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.st.Daily[date])
}

// AllDayStats returns every day's aggregates: date → rule → stats.
func (f *FSM) AllDayStats() map[string]map[string]*DayStats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string]map[string]*DayStats, len(f.st.Daily))
	for d, m := range f.st.Daily {
		out[d] = maps.Clone(m)
	}
	return out
}

// Counts returns the number of tasks pending and alerts not acknowledged.
func (f *FSM) Counts() (pendingTasks, openAlerts int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, a := range f.st.Alerts {
		if !a.Acked {
			openAlerts++
		}
	}
	return f.st.taskQueue.Len(), openAlerts
}

// Quantile estimates the q-quantile of a DayStats histogram (SlotToSent or
// Lateness), interpolating linearly inside the bucket it falls in.
func Quantile(hist []uint64, q float64) time.Duration {
	var total uint64
	for _, n := range hist {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	var cum float64
	for i, n := range hist {
		if cum+float64(n) >= rank && n > 0 {
			lo := time.Duration(0)
			if i > 0 {
				lo = LatencyBuckets[i-1]
			}
			if i >= len(LatencyBuckets) {
				return lo // past the last bound: the bound is all we know
			}
			frac := (rank - cum) / float64(n)
			return lo + time.Duration(frac*float64(LatencyBuckets[i]-lo))
		}
		cum += float64(n)
	}
	return LatencyBuckets[len(LatencyBuckets)-1]
}
