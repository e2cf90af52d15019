// Package poll is the one way Herald's tests wait for a condition: poll it
// with a deadline, never sleep a fixed time. It imports nothing of Herald,
// so the engine's own (internal) tests can use it too.
package poll

import (
	"testing"
	"time"
)

// Interval is how often Until re-checks its condition.
const Interval = 5 * time.Millisecond

// Until re-checks cond every Interval until it holds, and returns how long
// that took; past within it fails the test, saying what it waited for.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(Interval) // polling a condition, with a deadline
	}
	return time.Since(start)
}
