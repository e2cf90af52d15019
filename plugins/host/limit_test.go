package host

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/plugins/sdk"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// drain admits priority p at now until it must wait, and returns how many
// went and the wait.
func drain(t *testing.T, l *Limiter, recipient string, p heraldtype.Priority, now time.Time) (int, time.Duration) {
	t.Helper()
	for n := 0; n < 10_000; n++ {
		if w := l.Admit(recipient, p, now); w > 0 {
			return n, w
		}
	}
	t.Fatal("limiter never said wait")
	return 0, 0
}

func TestBucketOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		count    int
		per      time.Duration
		burst    int
		interval time.Duration
	}{
		{30, time.Minute, 15, 4 * time.Second},            // WeCom, per member
		{1000, time.Hour, 500, 7200 * time.Millisecond},   // WeCom, per member
		{20, time.Minute, 10, 6 * time.Second},            // WeCom, per robot
		{50, time.Second, 25, 40 * time.Millisecond},      // calls per second
		{7, time.Second, 3, 250 * time.Millisecond},       // odd: 3 + 1s/250ms = 7
		{3, time.Second, 1, 500 * time.Millisecond},       // 1 + 2
		{1, time.Hour, 1, time.Hour},                      // one per hour
		{3, 10 * time.Nanosecond, 1, 5 * time.Nanosecond}, // rounds the interval up
	} {
		b, iv := BucketOf(sdk.Limit{Count: c.count, Per: c.per})
		require.Equal(t, c.burst, b, "%d per %s", c.count, c.per)
		require.Equal(t, c.interval, iv, "%d per %s", c.count, c.per)
		if c.count > 1 {
			require.LessOrEqual(t, b+int(c.per/iv), c.count, "burst + refill within Per")
		}
	}
}

func TestChannelBucketKeepsHighReserve(t *testing.T) {
	t.Parallel()
	// 10/s: burst 5, a token every 200ms; 20% of 5 is one token for high.
	l := NewLimiter([]sdk.Limit{{Scope: sdk.ScopeChannel, Count: 10, Per: time.Second}}, 0.2, 10)

	n, wait := drain(t, l, "", heraldtype.PriorityNormal, t0)
	require.Equal(t, 4, n, "normal may use 80%% of the bucket")
	require.Equal(t, 200*time.Millisecond, wait, "one token is 200ms; the reserve stays")

	n, _ = drain(t, l, "", heraldtype.PriorityLow, t0)
	require.Zero(t, n)
	n, wait = drain(t, l, "", heraldtype.PriorityHigh, t0)
	require.Equal(t, 1, n, "high may use the reserve")
	require.Equal(t, 200*time.Millisecond, wait)

	// Refilled by one token, a normal message waits for the reserve to
	// refill first.
	require.Equal(t, 200*time.Millisecond, l.Admit("", heraldtype.PriorityNormal, t0.Add(200*time.Millisecond)))
	require.Zero(t, l.Admit("", heraldtype.PriorityNormal, t0.Add(400*time.Millisecond)))
}

func TestFullBurstThenSteady(t *testing.T) {
	t.Parallel()
	// WeCom's per-member limits, as the wecom channel declares them.
	l := NewLimiter([]sdk.Limit{
		{Scope: sdk.ScopeRecipient, Count: 30, Per: time.Minute},
		{Scope: sdk.ScopeRecipient, Count: 1000, Per: time.Hour},
	}, 0, 10)
	now := t0
	var admitted []time.Time
	for now.Before(t0.Add(2 * time.Hour)) {
		if w := l.Admit("alice", heraldtype.PriorityNormal, now); w > 0 {
			now = now.Add(w)
			continue
		}
		admitted = append(admitted, now)
	}
	require.Equal(t, 15, countIn(admitted, t0, t0), "a burst of half the minute's count")
	require.Equal(t, 30, countIn(admitted, t0, t0.Add(time.Minute)), "then one every 4s: 30 in the closed minute")
	require.Equal(t, 29, countIn(admitted, t0, t0.Add(time.Minute-time.Nanosecond)),
		"any minute as WeCom counts it, (t-1m, t], holds at most 29: one interval of slack for latency jitter")
	require.LessOrEqual(t, countIn(admitted, t0, t0.Add(time.Hour)), 1000)
	require.Greater(t, len(admitted), 1000, "the hour's limit lets the second hour go on")
}

// countIn counts the sorted times within [from, to].
func countIn(ts []time.Time, from, to time.Time) int {
	n := 0
	for _, ts := range ts {
		if !ts.Before(from) && !ts.After(to) {
			n++
		}
	}
	return n
}

func TestWaitTakesNothing(t *testing.T) {
	t.Parallel()
	// Channel 1/s: a token every second. Alice 10/min: burst 5, a token
	// every 12s, one of the five reserved for high.
	l := NewLimiter([]sdk.Limit{
		{Scope: sdk.ScopeChannel, Count: 1, Per: time.Second},
		{Scope: sdk.ScopeRecipient, Count: 10, Per: time.Minute},
	}, 0.2, 10)
	require.Zero(t, l.Admit("alice", heraldtype.PriorityNormal, t0))
	for range 5 {
		require.Equal(t, time.Second, l.Admit("alice", heraldtype.PriorityNormal, t0), "channel bucket empty")
	}
	// The refused tries took nothing from alice's bucket: 4 of 5 remain
	// (reserve 1: normal gets 3 more).
	for i := range 3 {
		require.Zero(t, l.Admit("alice", heraldtype.PriorityNormal, t0.Add(time.Duration(i+1)*time.Second)), "try %d", i)
	}
	require.Equal(t, 8*time.Second, l.Admit("alice", heraldtype.PriorityNormal, t0.Add(4*time.Second)))
	require.Zero(t, l.Admit("alice", heraldtype.PriorityHigh, t0.Add(4*time.Second)))
}

func TestRecipientBuckets(t *testing.T) {
	t.Parallel()
	l := NewLimiter([]sdk.Limit{{Scope: sdk.ScopeRecipient, Count: 1, Per: time.Hour}}, 0.2, 1000)
	require.Zero(t, l.Admit("alice", heraldtype.PriorityNormal, t0), "a bucket of one holds no reserve")
	require.Equal(t, time.Hour, l.Admit("alice", heraldtype.PriorityNormal, t0))
	require.Equal(t, time.Hour, l.Admit("alice", heraldtype.PriorityHigh, t0))
	require.Zero(t, l.Admit("bob", heraldtype.PriorityNormal, t0), "recipients are counted apart")
	require.Equal(t, 30*time.Minute, l.Admit("alice", heraldtype.PriorityNormal, t0.Add(30*time.Minute)))
	require.Zero(t, l.Admit("alice", heraldtype.PriorityNormal, t0.Add(time.Hour)))
}

func TestRecipientCacheIsBoundedAndForgetsOnlyIdle(t *testing.T) {
	t.Parallel()
	// 2/min: one at a time, a token every minute.
	l := NewLimiter([]sdk.Limit{{Scope: sdk.ScopeRecipient, Count: 2, Per: time.Minute}}, 0, 100)
	for i := range 100 {
		require.Zero(t, l.Admit(fmt.Sprint("user", i), heraldtype.PriorityNormal, t0))
	}
	// The cache is full of recipients whose buckets are still refilling:
	// forgetting one would let it burst, so a newcomer waits.
	require.Equal(t, time.Minute, l.Admit("late", heraldtype.PriorityNormal, t0))
	require.Equal(t, time.Minute, l.Admit("user0", heraldtype.PriorityNormal, t0), "user0 was not forgotten")
	require.Equal(t, 100, l.recipients.Len())

	// A minute on, every bucket is full again: forgetting is free.
	later := t0.Add(time.Minute)
	for i := range 10_000 {
		require.Zero(t, l.Admit(fmt.Sprint("new", i), heraldtype.PriorityNormal, later.Add(time.Duration(i)*time.Minute)))
	}
	require.Equal(t, 100, l.recipients.Len())
}

func TestNoLimitsAdmitsAll(t *testing.T) {
	t.Parallel()
	l := NewLimiter(nil, 0.2, 10)
	for range 1000 {
		require.Zero(t, l.Admit("alice", heraldtype.PriorityLow, t0))
	}
}

func TestLimiterSame(t *testing.T) {
	t.Parallel()
	lims := []sdk.Limit{{Scope: sdk.ScopeChannel, Count: 10, Per: time.Second}}
	l := NewLimiter(lims, 0.2, 10)
	require.True(t, l.same([]sdk.Limit{{Scope: sdk.ScopeChannel, Count: 10, Per: time.Second}}))
	require.False(t, l.same(nil))
	require.Equal(t, "channel 10 per 1s: burst 5, one more every 200ms", l.String())
}

// TestNoWindowExceedsCount is the limiter's promise, checked on generated
// traffic: bursts, idle gaps, retries exactly when told, arrivals on and
// around window boundaries, mixed priorities, and a recipient cache small
// enough to be under pressure. For every limit, no window (t−Per, t] holds
// more than Count admissions (WeCom's "in the last minute"); for Count ≥ 2
// neither does a closed window [t−Per, t], nor even a window one interval
// longer, which is the slack left for jitter between admission and
// arrival. A retry at exactly the wait Admit answered is admitted.
func TestNoWindowExceedsCount(t *testing.T) {
	t.Parallel()
	pers := []time.Duration{time.Millisecond, 7 * time.Millisecond, time.Second, time.Minute, time.Hour}
	rapid.Check(t, func(rt *rapid.T) {
		nLimits := rapid.IntRange(1, 3).Draw(rt, "limits")
		var limits []sdk.Limit
		for i := range nLimits {
			scope := rapid.SampledFrom([]sdk.LimitScope{sdk.ScopeChannel, sdk.ScopeRecipient}).Draw(rt, fmt.Sprint("scope", i))
			limits = append(limits, sdk.Limit{
				Scope: scope,
				Count: rapid.IntRange(1, 40).Draw(rt, fmt.Sprint("count", i)),
				Per:   rapid.SampledFrom(pers).Draw(rt, fmt.Sprint("per", i)),
			})
		}
		reserve := rapid.SampledFrom([]float64{0, 0.2, 0.5, 0.9}).Draw(rt, "reserve")
		cache := rapid.IntRange(1, 6).Draw(rt, "cache")
		names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}[:rapid.IntRange(1, 8).Draw(rt, "recipients")]
		l := NewLimiter(limits, reserve, cache)

		type admission struct {
			at        time.Time
			recipient string
		}
		var admitted []admission
		now := t0
		var lastWait time.Duration
		var lastRefused struct {
			recipient string
			p         heraldtype.Priority
		}
		steps := rapid.IntRange(1, 400).Draw(rt, "steps")
		for i := range steps {
			recipient := rapid.SampledFrom(names).Draw(rt, "recipient")
			p := rapid.SampledFrom([]heraldtype.Priority{heraldtype.PriorityLow, heraldtype.PriorityNormal, heraldtype.PriorityHigh}).Draw(rt, "priority")
			per := limits[rapid.IntRange(0, len(limits)-1).Draw(rt, "near")].Per
			retry := false
			switch rapid.IntRange(0, 6).Draw(rt, "gap") {
			case 0: // the same instant: a burst
			case 1:
				now = now.Add(time.Nanosecond)
			case 2: // the retry, exactly when told
				if lastWait > 0 {
					now = now.Add(lastWait)
					recipient, p, retry = lastRefused.recipient, lastRefused.p, true
				}
			case 3:
				now = now.Add(time.Duration(rapid.Int64Range(1, int64(per)).Draw(rt, "within")))
			case 4: // on and around a window boundary
				now = now.Add(per + time.Duration(rapid.IntRange(-1, 1).Draw(rt, "jitter")))
			case 5:
				now = now.Add(per / time.Duration(rapid.IntRange(2, 40).Draw(rt, "fraction")))
			case 6: // idle
				now = now.Add(per * time.Duration(rapid.IntRange(2, 5).Draw(rt, "periods")))
			}
			w := l.Admit(recipient, p, now)
			if retry {
				require.Zero(rt, w, "step %d: a retry after the answered wait is admitted", i)
			}
			require.GreaterOrEqual(rt, w, time.Duration(0))
			lastWait = w
			if w == 0 {
				admitted = append(admitted, admission{now, recipient})
			} else {
				require.GreaterOrEqual(rt, w, minWait)
				lastRefused.recipient, lastRefused.p = recipient, p
			}
		}

		for _, lim := range limits {
			streams := map[string][]time.Time{}
			for _, a := range admitted {
				key := ""
				if lim.Scope == sdk.ScopeRecipient {
					key = a.recipient
				}
				streams[key] = append(streams[key], a.at)
			}
			_, interval := BucketOf(lim)
			for key, ts := range streams {
				require.LessOrEqual(rt, maxInWindow(ts, lim.Per, false), lim.Count, "%+v %q: (t-Per, t]", lim, key)
				if lim.Count >= 2 {
					require.LessOrEqual(rt, maxInWindow(ts, lim.Per, true), lim.Count, "%+v %q: [t-Per, t]", lim, key)
					require.LessOrEqual(rt, maxInWindow(ts, lim.Per+interval, false), lim.Count, "%+v %q: (t-Per-T, t]", lim, key)
				}
			}
		}
	})
}

// maxInWindow is the most times in any window of length per ending at one
// of them: (t−per, t], or [t−per, t] when closed. ts is sorted.
func maxInWindow(ts []time.Time, per time.Duration, closed bool) int {
	best, lo := 0, 0
	for hi, t := range ts {
		from := t.Add(-per)
		for lo < hi && (ts[lo].Before(from) || (!closed && ts[lo].Equal(from))) {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

func TestMaxInWindowCanFail(t *testing.T) {
	t.Parallel()
	ts := []time.Time{t0, t0.Add(time.Second), t0.Add(time.Minute)}
	require.Equal(t, 2, maxInWindow(ts, time.Minute, false))
	require.Equal(t, 3, maxInWindow(ts, time.Minute, true))
	require.Equal(t, 1, maxInWindow(ts, time.Second/2, false))
}

func BenchmarkAdmit(b *testing.B) {
	l := NewLimiter([]sdk.Limit{
		{Scope: sdk.ScopeChannel, Count: 1_000_000_000, Per: time.Second},
		{Scope: sdk.ScopeRecipient, Count: 30, Per: time.Minute},
		{Scope: sdk.ScopeRecipient, Count: 1000, Per: time.Hour},
	}, 0.2, DefaultRecipientCache)
	names := make([]string, 1<<16)
	for i := range names {
		names[i] = fmt.Sprint("user", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.Admit(names[i&(len(names)-1)], heraldtype.PriorityNormal, t0.Add(time.Duration(i)*time.Microsecond))
	}
}

func TestClockStepBackDoesNotStallTheChannel(t *testing.T) {
	t.Parallel()
	// A wall clock stepped back (NTP, an operator) makes every recent
	// admission look as if it lay in the future. The bucket is then at
	// worst empty: the wait is bounded by the bucket, not by the step.
	l := NewLimiter([]sdk.Limit{
		{Scope: sdk.ScopeChannel, Count: 50, Per: time.Second},
		{Scope: sdk.ScopeRecipient, Count: 30, Per: time.Minute},
	}, 0.2, 2)
	n, _ := drain(t, l, "alice", heraldtype.PriorityHigh, t0)
	require.Equal(t, 15, n, "alice's minute bucket: burst 15")
	require.Zero(t, l.Admit("bob", heraldtype.PriorityHigh, t0))

	back := t0.Add(-time.Hour)
	w := l.Admit("carol", heraldtype.PriorityNormal, back)
	require.Positive(t, w, "the cache of two is full of recipients still catching up")
	require.LessOrEqual(t, w, time.Minute, "no wait longer than a bucket takes to refill")
	w = l.Admit("alice", heraldtype.PriorityNormal, back)
	require.LessOrEqual(t, w, time.Minute)
	w = l.Admit("bob", heraldtype.PriorityHigh, back)
	require.Positive(t, w)
	require.LessOrEqual(t, w, time.Minute)
	require.Zero(t, l.Admit("bob", heraldtype.PriorityHigh, back.Add(w)), "admitted when told")

	// A late reading, not a step: the bucket stays exact.
	l = NewLimiter([]sdk.Limit{{Scope: sdk.ScopeChannel, Count: 2, Per: time.Minute}}, 0, 2)
	require.Zero(t, l.Admit("alice", heraldtype.PriorityNormal, t0))
	require.Equal(t, time.Minute+time.Millisecond, l.Admit("alice", heraldtype.PriorityNormal, t0.Add(-time.Millisecond)))
	require.Equal(t, time.Minute, l.Admit("alice", heraldtype.PriorityNormal, t0))
}

func TestHugeLimitsDoNotOverflow(t *testing.T) {
	t.Parallel()
	for _, lim := range []sdk.Limit{
		{Scope: sdk.ScopeChannel, Count: 1, Per: math.MaxInt64},
		{Scope: sdk.ScopeRecipient, Count: 3, Per: math.MaxInt64},
		{Scope: sdk.ScopeChannel, Count: 1000, Per: math.MaxInt64 - 1},
	} {
		_, interval := BucketOf(lim)
		require.Positive(t, interval, "%+v", lim)
		clamped := lim
		clamped.Per = min(lim.Per, MaxLimitPer)
		burst, interval := BucketOf(clamped)
		l := NewLimiter([]sdk.Limit{lim}, 0.2, 10)
		n, w := drain(t, l, "alice", heraldtype.PriorityHigh, t0)
		require.Equal(t, burst, n, "%+v: the burst, then a wait", lim)
		require.Positive(t, w, "%+v", lim)
		w = l.Admit("alice", heraldtype.PriorityHigh, t0.Add(interval/2))
		require.Positive(t, w, "%+v: half an interval later the bucket has no token yet", lim)
	}
	require.ErrorIs(t, checkInfo(sdk.Info{Name: "x", Limits: []sdk.Limit{{Scope: sdk.ScopeChannel, Count: 1, Per: MaxLimitPer + 1}}}), ErrBadInfo)
	require.NoError(t, checkInfo(sdk.Info{Name: "x", Limits: []sdk.Limit{{Scope: sdk.ScopeChannel, Count: 1, Per: MaxLimitPer}}}))
}
