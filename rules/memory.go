package rules

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	rtmetrics "runtime/metrics"
	"sync"
	"time"
)

// DefaultMemoryLimit is Config.MemoryLimit when it is zero: how much the
// node's heap may grow while one rule call runs.
const DefaultMemoryLimit = 128 << 20

// ErrMemory means a rule call grew the node's memory past Config.MemoryLimit
// and was stopped.
var ErrMemory = errors.New("rule call stopped: memory limit")

// memorySampleEvery is how often the watch reads the heap while calls run.
const memorySampleEvery = time.Millisecond

// gopher-lua has no allocation hook, so a call's memory is the growth of
// the Go heap (objects and goroutine stacks, read from runtime/metrics:
// no stop-the-world) since the call began, sampled every millisecond by
// one goroutine that runs while any call does. Past the limit it first
// collects (garbage is not growth), and if the growth is still over, it
// stops the youngest call over its limit through the call's context, as
// the time limit does. The heap is the process's: several calls at once
// all see one call's growth. The youngest over the limit is the one that
// began last before the growth, which is the culprit whenever the others
// allocate little; the others' starts are then moved up to the heap as it
// is, so the culprit's growth is not counted against them again. A wrong
// pick lets the culprit go on until it passes the limit once more: calls
// running at once grow the heap by at most their number times the limit.
//
// What the sampling cannot see is one instruction's allocation: a string
// concatenation (concat.go) is refused before it allocates past the
// limit, and the library functions that build strings check their sizes
// first (sandbox.go). So the heap grows by at most about twice the limit.
type memWatch struct {
	mu      sync.Mutex
	calls   map[*memCall]struct{}
	seq     uint64
	running bool
}

// memCall is one call under the watch.
type memCall struct {
	w      *memWatch
	seq    uint64 // order of start: the youngest is stopped first
	limit  uint64
	start  uint64 // heap at the start, or after an earlier stop
	cancel context.CancelCauseFunc
}

// MemoryError is why a call was stopped for its memory: the heap grew by
// Grew, or one concatenation would have made a string of Concat bytes.
type MemoryError struct {
	Grew, Concat, Limit uint64
}

func (e *MemoryError) Error() string {
	if e.Concat > 0 {
		return fmt.Sprintf("a string concatenation would make %s, over the rule memory limit of %s", FormatSize(e.Concat), FormatSize(e.Limit))
	}
	return fmt.Sprintf("the node's memory grew by %s while this call ran, over the rule memory limit of %s", FormatSize(e.Grew), FormatSize(e.Limit))
}

func (e *MemoryError) Unwrap() error { return ErrMemory }

var watch = &memWatch{calls: map[*memCall]struct{}{}}

// memKey finds a call's memCall in its context (for concatenation).
type memKey struct{}

// callMemory returns the memory watch of the call ctx belongs to, or nil.
func callMemory(ctx context.Context) *memCall {
	if ctx == nil {
		return nil
	}
	c, _ := ctx.Value(memKey{}).(*memCall)
	return c
}

// begin puts a call with limit under the watch: its context ends with a
// *MemoryError cause when it grows past the limit. end takes it off.
func (w *memWatch) begin(ctx context.Context, limit uint64) (cctx context.Context, end func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	c := &memCall{w: w, limit: limit, start: heapInUse(heapSamples()), cancel: cancel}
	cctx = context.WithValue(cctx, memKey{}, c)
	w.mu.Lock()
	w.seq++
	c.seq = w.seq
	w.calls[c] = struct{}{}
	if !w.running {
		w.running = true
		go w.loop()
	}
	w.mu.Unlock()
	return cctx, func() {
		w.mu.Lock()
		delete(w.calls, c)
		w.mu.Unlock()
		cancel(nil)
	}
}

// stop ends c's call for err, before it allocates (concatenation).
func (c *memCall) stop(err *MemoryError) {
	c.w.mu.Lock()
	delete(c.w.calls, c)
	c.w.mu.Unlock()
	c.cancel(err)
}

// loop samples the heap while calls run.
func (w *memWatch) loop() {
	samples := heapSamples()
	tick := time.NewTicker(memorySampleEvery)
	defer tick.Stop()
	for range tick.C {
		w.mu.Lock()
		if len(w.calls) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		over := w.youngestOver(heapInUse(samples))
		w.mu.Unlock()
		if over == nil {
			continue
		}
		runtime.GC() // what is still there after a collection is the calls' own
		heap := heapInUse(samples)
		w.mu.Lock()
		if c := w.youngestOver(heap); c != nil {
			delete(w.calls, c)
			c.cancel(&MemoryError{Grew: heap - c.start, Limit: c.limit})
			for o := range w.calls {
				o.start = max(o.start, heap)
			}
		}
		w.mu.Unlock()
	}
}

// youngestOver is the youngest call grown past its limit at heap, or nil.
// The caller holds w.mu.
func (w *memWatch) youngestOver(heap uint64) *memCall {
	var out *memCall
	for c := range w.calls {
		if heap > c.start && heap-c.start > c.limit && (out == nil || c.seq > out.seq) {
			out = c
		}
	}
	return out
}

// heapSamples are the runtime/metrics the watch reads: live and not yet
// swept heap objects, and goroutine stacks (a pattern's recursion).
func heapSamples() []rtmetrics.Sample {
	return []rtmetrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
	}
}

func heapInUse(s []rtmetrics.Sample) uint64 {
	rtmetrics.Read(s)
	var n uint64
	for _, v := range s {
		if v.Value.Kind() == rtmetrics.KindUint64 {
			n += v.Value.Uint64()
		}
	}
	return n
}

// FormatSize writes a byte count for people: GiB, MiB or KiB when whole,
// MiB with a decimal above 1 MiB, else bytes.
func FormatSize(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
