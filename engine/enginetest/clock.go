package enginetest

import (
	"sync"
	"time"
)

// Clock is a clock a test moves by hand: its Now is a loop's NowFunc, so
// a test jumps through hours without sleeping. It is safe for the loops'
// goroutines and the test to use at once.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the time last set.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
