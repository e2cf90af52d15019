package host

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/plugins/sdk"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// drain admits priority p at now until it must wait, and returns how many
// went and the wait.
func drain(l *limiter, recipient string, p engine.Priority, now time.Time) (int, time.Duration) {
	for n := 0; n < 10_000; n++ {
		if w := l.admit(recipient, p, now); w > 0 {
			return n, w
		}
	}
	panic("limiter never said wait")
}

func TestChannelBucketKeepsHighReserve(t *testing.T) {
	t.Parallel()
	l := newLimiter([]sdk.Limit{{Scope: sdk.ScopeChannel, Count: 10, Per: time.Second}}, 0.2, 10)

	n, wait := drain(l, "", engine.PriorityNormal, t0)
	require.Equal(t, 8, n, "normal may use 80%% of the bucket")
	require.Equal(t, 100*time.Millisecond, wait, "one token is 100ms; the reserve stays")

	n, _ = drain(l, "", engine.PriorityLow, t0)
	require.Zero(t, n)
	n, wait = drain(l, "", engine.PriorityHigh, t0)
	require.Equal(t, 2, n, "high may use the reserve")
	require.Equal(t, 100*time.Millisecond, wait)

	// Refilled after the wait, a normal message waits for the reserve to
	// refill first.
	require.Equal(t, 200*time.Millisecond, l.admit("", engine.PriorityNormal, t0.Add(100*time.Millisecond)))
	require.Zero(t, l.admit("", engine.PriorityNormal, t0.Add(300*time.Millisecond)))
}

func TestWaitTakesNothing(t *testing.T) {
	t.Parallel()
	l := newLimiter([]sdk.Limit{
		{Scope: sdk.ScopeChannel, Count: 1, Per: time.Second},
		{Scope: sdk.ScopeRecipient, Count: 5, Per: time.Minute},
	}, 0.2, 10)
	require.Zero(t, l.admit("alice", engine.PriorityNormal, t0))
	for range 5 {
		require.Equal(t, time.Second, l.admit("alice", engine.PriorityNormal, t0), "channel bucket empty")
	}
	// The refused tries took nothing from alice's bucket: 4 of 5 remain
	// (reserve 1: normal gets 3 more).
	for i := range 3 {
		require.Zero(t, l.admit("alice", engine.PriorityNormal, t0.Add(time.Duration(i+1)*time.Second)), "try %d", i)
	}
	require.Positive(t, l.admit("alice", engine.PriorityNormal, t0.Add(4*time.Second)))
	require.Zero(t, l.admit("alice", engine.PriorityHigh, t0.Add(4*time.Second)))
}

func TestRecipientBuckets(t *testing.T) {
	t.Parallel()
	l := newLimiter([]sdk.Limit{{Scope: sdk.ScopeRecipient, Count: 1, Per: time.Hour}}, 0.2, 1000)
	require.Zero(t, l.admit("alice", engine.PriorityNormal, t0), "a bucket of one holds no reserve")
	require.Equal(t, time.Hour, l.admit("alice", engine.PriorityNormal, t0))
	require.Equal(t, time.Hour, l.admit("alice", engine.PriorityHigh, t0))
	require.Zero(t, l.admit("bob", engine.PriorityNormal, t0), "recipients are counted apart")
	require.Equal(t, 30*time.Minute, l.admit("alice", engine.PriorityNormal, t0.Add(30*time.Minute)))
	require.Zero(t, l.admit("alice", engine.PriorityNormal, t0.Add(time.Hour)))
}

func TestRecipientCacheIsBounded(t *testing.T) {
	t.Parallel()
	l := newLimiter([]sdk.Limit{{Scope: sdk.ScopeRecipient, Count: 2, Per: time.Minute}}, 0, 100)
	for i := range 10_000 {
		require.Zero(t, l.admit(fmt.Sprint("user", i), engine.PriorityNormal, t0))
	}
	require.Equal(t, 100, l.recipients.Len())
}

func TestNoLimitsAdmitsAll(t *testing.T) {
	t.Parallel()
	l := newLimiter(nil, 0.2, 10)
	for range 1000 {
		require.Zero(t, l.admit("alice", engine.PriorityLow, t0))
	}
}

func TestLimiterSame(t *testing.T) {
	t.Parallel()
	lims := []sdk.Limit{{Scope: sdk.ScopeChannel, Count: 10, Per: time.Second}}
	l := newLimiter(lims, 0.2, 10)
	require.True(t, l.same([]sdk.Limit{{Scope: sdk.ScopeChannel, Count: 10, Per: time.Second}}))
	require.False(t, l.same(nil))
}

func BenchmarkAdmit(b *testing.B) {
	l := newLimiter([]sdk.Limit{
		{Scope: sdk.ScopeChannel, Count: 1_000_000_000, Per: time.Second},
		{Scope: sdk.ScopeRecipient, Count: 30, Per: time.Minute},
	}, 0.2, DefaultRecipientCache)
	names := make([]string, 1<<16)
	for i := range names {
		names[i] = fmt.Sprint("user", i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.admit(names[i&(len(names)-1)], engine.PriorityNormal, t0.Add(time.Duration(i)*time.Microsecond))
	}
}
