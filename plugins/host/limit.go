package host

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/plugins/sdk"
)

// minWait is the shortest wait Admit answers, so that a caller polling on
// it cannot spin.
const minWait = time.Millisecond

// clockStep is how far back the clock must go for the limiter to take it
// as a stepped clock rather than a caller's late reading (see rule.ahead).
const clockStep = time.Second

// MaxLimitPer is the longest Per a Limit may have: ten years. A plugin
// declaring a longer one is refused (ErrBadInfo).
const MaxLimitPer = 10 * 365 * 24 * time.Hour

// Limiter enforces one channel instance's declared limits. It reads each
// sdk.Limit{Count, Per} as a promise to the provider: no window of length
// Per, anywhere in time, holds more than Count admitted messages. WeCom
// counts such sliding windows and drops the excess without a word, so a
// plain token bucket (burst Count, refill Count per Per) would not do: it
// lets 2×Count through one window, a full burst and then the refill.
//
// Each limit is a token bucket of burst b = ⌊Count/2⌋ refilled one token
// per interval T = ⌈Per / (Count−b)⌉, so that b + Per/T ≤ Count: whatever
// the timing, the tokens that one window can use are the b in the bucket at
// its start and the Per/T that arrive within it (a Count of 1 is one
// message per Per). The bucket is kept in its GCRA form, one theoretical
// arrival time in integer nanoseconds, which is exact at window boundaries
// and costs 8 bytes per limit and recipient. See DESIGN.md.
//
// A share of every bucket (the high reserve) is usable only by
// heraldtype.PriorityHigh, so that a 9:00 flood of reports cannot starve an
// urgent enquiry alert. A Limiter is safe for concurrent use.
type Limiter struct {
	mu         sync.Mutex
	limits     []sdk.Limit
	reserve    float64
	channel    []rule
	channelTAT []int64
	perRcpt    []rule
	recipients *simplelru.LRU[string, []int64]
	capacity   int // of recipients
}

// rule is one limit as a GCRA: a message may go when the bucket's
// theoretical arrival time is at most tolerance ahead of now, and takes
// interval from the bucket.
type rule struct {
	interval  int64 // ns per token: T
	tolerance int64 // (b−1)·T: how far ahead high priority may run
	normal    int64 // tolerance less the high reserve
	empty     int64 // b·T: how far ahead an empty bucket's TAT is
}

// NewLimiter returns a Limiter of limits (ScopeChannel and ScopeRecipient;
// others are ignored). highReserve (0 ≤ x < 1) is the share of every bucket
// kept for heraldtype.PriorityHigh; recipients caps the per-recipient state
// kept (DefaultRecipientCache when ≤ 0).
func NewLimiter(limits []sdk.Limit, highReserve float64, recipients int) *Limiter {
	l := &Limiter{limits: slices.Clone(limits), reserve: highReserve}
	for _, lim := range limits {
		if lim.Count <= 0 || lim.Per <= 0 {
			continue // checkInfo refuses these before they get here
		}
		// So does checkInfo: a longer window would not fit the int64
		// nanoseconds of a TAT.
		lim.Per = min(lim.Per, MaxLimitPer)
		switch lim.Scope {
		case sdk.ScopeChannel:
			l.channel = append(l.channel, newRule(lim, highReserve))
			l.channelTAT = append(l.channelTAT, math.MinInt64)
		case sdk.ScopeRecipient:
			l.perRcpt = append(l.perRcpt, newRule(lim, highReserve))
		}
	}
	if len(l.perRcpt) > 0 {
		if recipients <= 0 {
			recipients = DefaultRecipientCache
		}
		l.capacity = recipients
		l.recipients, _ = simplelru.NewLRU[string, []int64](recipients, nil)
	}
	return l
}

// BucketOf returns the token bucket that enforces lim: its burst and the
// interval at which it gains a token. Together they keep every window of
// length lim.Per at lim.Count messages or fewer.
func BucketOf(lim sdk.Limit) (burst int, interval time.Duration) {
	if lim.Count <= 1 {
		return 1, lim.Per
	}
	burst = lim.Count / 2
	refill := int64(lim.Count - burst)
	// Rounding up keeps Per/T ≤ Count−b (and cannot overflow).
	per := int64(lim.Per)
	interval = time.Duration(per / refill)
	if per%refill != 0 {
		interval++
	}
	return burst, interval
}

func newRule(lim sdk.Limit, reserve float64) rule {
	burst, interval := BucketOf(lim)
	t := int64(interval)
	tolerance := satMul(int64(burst-1), t)
	// Never reserve the last token: a bucket of one must still let a
	// normal message through.
	reserved := math.Min(reserve*float64(burst), float64(burst-1))
	reserved = math.Max(reserved, 0)
	return rule{
		interval:  t,
		tolerance: tolerance,
		normal:    tolerance - int64(math.Round(reserved*float64(t))),
		empty:     satAdd(tolerance, t),
	}
}

// ahead is how far the bucket's TAT runs ahead of t. A TAT never runs
// further ahead than an empty bucket's unless the clock went back. A
// stepped wall clock (NTP, an operator) would otherwise stall the bucket
// for the size of the step, an hour for an hour; the bucket is then taken
// as empty at t, which is all it can be in real time. A small step back is
// more likely a caller that read the time just before another's admission
// (real time did not go back): it is left alone, so that the limit stays
// exact, and costs a wait of at most clockStep more.
func (r rule) ahead(tat *int64, t int64) int64 {
	a := max(*tat, t) - t
	if a > satAdd(r.empty, int64(clockStep)) {
		*tat, a = t+r.empty, r.empty
	}
	return a
}

// satAdd and satMul are + and × on non-negative int64s, stopping at
// math.MaxInt64 instead of wrapping: a limit of one per 290 years must not
// become no limit at all.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// same reports whether the limiter enforces exactly limits.
func (l *Limiter) same(limits []sdk.Limit) bool {
	return slices.Equal(l.limits, limits)
}

// Admit takes one token from every bucket that applies to a message for
// recipient at now, or none and returns how long until all of them could
// give one. Time is the caller's: tests need no clock.
func (l *Limiter) Admit(recipient string, p heraldtype.Priority, now time.Time) time.Duration {
	t := now.UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()

	var wait int64
	check := func(rs []rule, tats []int64) {
		for i, r := range rs {
			allowed := r.normal
			if p == heraldtype.PriorityHigh {
				allowed = r.tolerance
			}
			if ahead := r.ahead(&tats[i], t); ahead > allowed {
				wait = max(wait, ahead-allowed)
			}
		}
	}
	check(l.channel, l.channelTAT)

	var rcpt []int64
	isNew := false
	if l.recipients != nil {
		var ok bool
		if rcpt, ok = l.recipients.Get(recipient); !ok {
			if w := l.roomFor(t); w > 0 {
				wait = max(wait, w)
			}
			isNew = true
			rcpt = make([]int64, len(l.perRcpt))
			for i := range rcpt {
				rcpt[i] = math.MinInt64
			}
		}
		check(l.perRcpt, rcpt)
	}
	if wait > 0 {
		return max(time.Duration(wait), minWait)
	}

	take := func(rs []rule, tats []int64) {
		for i, r := range rs {
			tats[i] = satAdd(max(tats[i], t), r.interval)
		}
	}
	take(l.channel, l.channelTAT)
	if l.recipients != nil {
		take(l.perRcpt, rcpt)
		if isNew {
			l.recipients.Add(recipient, rcpt)
		}
	}
	return 0
}

// roomFor makes room for one more recipient at t, or says how long until
// there is room. An entry whose buckets are all full again (every arrival
// time passed) holds nothing a fresh one would not, and is forgotten
// without loss. An entry still catching up is kept: forgetting it would
// refill its buckets and let a burst through that the provider drops. So
// when the least recently used recipient is still catching up, a new
// recipient waits; that takes more distinct recipients within the
// catch-up time than the cache holds.
func (l *Limiter) roomFor(t int64) int64 {
	if l.recipients.Len() < l.capacity {
		return 0
	}
	_, oldest, ok := l.recipients.GetOldest()
	if !ok {
		return 0
	}
	var busy int64
	for i := range oldest {
		busy = max(busy, l.perRcpt[i].ahead(&oldest[i], t))
	}
	if busy > 0 {
		return busy
	}
	l.recipients.RemoveOldest()
	return 0
}

// String describes the buckets, for logs.
func (l *Limiter) String() string {
	var b strings.Builder
	for i, lim := range l.limits {
		burst, iv := BucketOf(lim)
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %d per %s: burst %d, one more every %s", lim.Scope, lim.Count, lim.Per, burst, iv)
	}
	return b.String()
}
