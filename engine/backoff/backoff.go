// Package backoff is the one doubling wait Herald's retry loops share: a
// plan that failed to replicate, leader set-up, a join, a CLI write during
// an election, a crashing plugin's restarts.
package backoff

import (
	"context"
	"time"
)

// Doubling waits Min after the first failure and twice as long after each
// next one, up to Max. The zero value waits nothing; set both.
type Doubling struct {
	Min, Max time.Duration
	failures int
}

// Next returns the wait after one more failure.
func (b *Doubling) Next() time.Duration {
	b.failures++
	return b.After(b.failures)
}

// Reset starts again from Min (after a success).
func (b *Doubling) Reset() { b.failures = 0 }

// After is the wait after n failures in a row: 0 for none, then Min,
// 2·Min, 4·Min, … capped at Max.
func (b *Doubling) After(n int) time.Duration {
	if n <= 0 || b.Min <= 0 {
		return 0
	}
	d := b.Min
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Sleep waits d and reports true, or false as soon as ctx ends or stop
// (which may be nil) is closed.
func Sleep(ctx context.Context, d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}
