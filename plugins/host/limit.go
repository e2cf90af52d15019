package host

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/plugins/sdk"
)

// limiter enforces one channel instance's limits (from its plugin's Info)
// with token buckets: one per ScopeChannel limit, and one per ScopeRecipient
// limit and recipient. A share of every bucket is held back for
// PriorityHigh, so that a 9:00 flood of reports cannot starve an urgent
// enquiry alert.
type limiter struct {
	mu         sync.Mutex
	limits     []sdk.Limit
	reserve    float64
	channel    []*bucket
	perRcpt    []sdk.Limit
	recipients *simplelru.LRU[string, []*bucket]
}

// bucket is one token bucket and the tokens in it that only PriorityHigh
// may take.
type bucket struct {
	lim     *rate.Limiter
	reserve float64
}

func newLimiter(limits []sdk.Limit, reserve float64, recipients int) *limiter {
	l := &limiter{limits: slices.Clone(limits), reserve: reserve}
	for _, lim := range limits {
		switch lim.Scope {
		case sdk.ScopeChannel:
			l.channel = append(l.channel, newBucket(lim, reserve))
		case sdk.ScopeRecipient:
			l.perRcpt = append(l.perRcpt, lim)
		}
	}
	if len(l.perRcpt) > 0 {
		// An evicted recipient's buckets come back full. Buckets that were
		// idle for their period are full anyway, so with a cache larger
		// than the recipients active within one period nothing changes;
		// beyond that, memory stays bounded and a recipient may get one
		// extra burst.
		l.recipients, _ = simplelru.NewLRU[string, []*bucket](recipients, nil)
	}
	return l
}

func newBucket(l sdk.Limit, reserve float64) *bucket {
	burst := l.Count
	// Never hold back the last token: a bucket of one must still let a
	// normal message through.
	r := math.Min(reserve*float64(burst), float64(burst-1))
	return &bucket{
		lim:     rate.NewLimiter(rate.Limit(float64(l.Count)/l.Per.Seconds()), burst),
		reserve: math.Max(r, 0),
	}
}

// same reports whether the limiter enforces exactly limits.
func (l *limiter) same(limits []sdk.Limit) bool {
	return slices.Equal(l.limits, limits)
}

// admit takes one token from every bucket that applies, or none and
// returns how long until all of them could give one.
func (l *limiter) admit(recipient string, p engine.Priority, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	buckets := l.channel
	if l.recipients != nil {
		rb, ok := l.recipients.Get(recipient)
		if !ok {
			rb = make([]*bucket, len(l.perRcpt))
			for i, lim := range l.perRcpt {
				rb[i] = newBucket(lim, l.reserve)
			}
			l.recipients.Add(recipient, rb)
		}
		buckets = append(slices.Clip(buckets), rb...)
	}

	var wait time.Duration
	for _, b := range buckets {
		need := 1.0
		if p != engine.PriorityHigh {
			need += b.reserve
		}
		if short := need - b.lim.TokensAt(now); short > 0 {
			d := time.Duration(math.Ceil(short / float64(b.lim.Limit()) * float64(time.Second)))
			wait = max(wait, d)
		}
	}
	if wait > 0 {
		return max(wait, time.Millisecond)
	}
	for _, b := range buckets {
		b.lim.AllowN(now, 1)
	}
	return 0
}
