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

// DefaultMemoryLimit is how much the node's heap may grow while one rule
// call runs when Config.MemoryLimit is zero, before PersonMemoryAllowance.
const DefaultMemoryLimit = 128 << 20

// PersonMemoryAllowance is what the default limit grows by for each person
// in the directory. The limit is there to stop a runaway rule, and a rule
// that lists everyone once is not one: people.all() costs about 140 bytes
// a person in Lua (an empty table standing for them, its slot in the list,
// its entry in the stub registry: person_table.go), so a million people
// are 135 MiB, past a fixed 128 MiB with nothing else done. 256 bytes
// leaves room for a table of one's own per person besides. A limit set by
// the node's config is used as it is.
const PersonMemoryAllowance = 256

// memoryLimitFor is the rule memory limit of a version with that many
// people.
func (c *Config) memoryLimitFor(people int) uint64 {
	if c.MemoryLimit != 0 {
		return c.MemoryLimit
	}
	return DefaultMemoryLimit + PersonMemoryAllowance*uint64(people)
}

// ErrMemory means a rule call grew the node's memory past its version's
// limit (Config.MemoryLimit, or memoryLimitFor's default) and was stopped.
var ErrMemory = errors.New("rule call stopped: memory limit")

// memorySampleEvery is how often the watch reads the heap while calls run.
const memorySampleEvery = time.Millisecond

// gopher-lua has no allocation hook, so the watch reads the Go runtime's
// own counters (runtime/metrics: cheap, no stop-the-world) every
// millisecond, from one goroutine that runs while any call does:
//
//   - The trigger is what was allocated since the call began (bytes
//     allocated, a monotonic count, plus goroutine stack growth: a
//     pattern's recursion), so a collection meanwhile cannot hide a
//     call's growth.
//   - Past the limit, the watch collects (runtime.GC: garbage is not
//     growth) and compares the live heap with the live heap of the
//     collection before the call began. Over the limit, it stops the
//     youngest call over its limit through the call's context, as the
//     time limit does; under, the trigger starts counting again. A rule
//     that only makes garbage costs a collection per limit's worth of
//     allocation while it runs. The base may be stale (more was live at
//     that collection than when the call began); it is lowered to the
//     live heap of the watch's own collection when that is below it.
//
// The counters are the process's: calls running at once all see one
// call's growth. The youngest over the limit is the one that began last
// before the growth, which is the culprit whenever the others allocate
// little; the others' bases then move up to the live heap as it is, so the
// culprit's growth is not counted against them again. A wrong pick lets
// the culprit go on until it passes the limit once more: calls running at
// once hold at most their number times the limit.
//
// What the sampling cannot see is one instruction's allocation: a string
// concatenation (concat.go) is refused before it allocates when it would
// take the call past the limit (admit), and the library functions that build strings check their sizes
// first (sandbox.go). So a call holds at most about twice the limit.
type memWatch struct {
	mu      sync.Mutex
	calls   map[*memCall]struct{}
	seq     uint64
	running bool
}

// memCall is one call under the watch.
type memCall struct {
	w     *memWatch
	seq   uint64 // order of start: the youngest is stopped first
	limit uint64
	// counted is the allocation count (plus stacks) where the trigger
	// counts from: the call's start, or its last collection.
	counted uint64
	// budget is how much may be allocated past counted before the next
	// look: what is left of the limit after the growth last seen, so that
	// a call whose allocations are half garbage is looked at again before
	// its live growth can pass the limit (a whole limit's budget after
	// each look let it end at nearly twice the limit unseen). At least
	// minBudget of the limit, so a call near its limit costs a collection
	// per sixteenth of the limit, not per sample.
	budget uint64
	// base is the live heap (plus stacks) the call's growth is measured
	// from: the last collection's before the call began, or after an
	// earlier stop.
	base   uint64
	cancel context.CancelCauseFunc
}

// MemoryError is why a call was stopped for its memory: the heap grew by
// Grew, or one concatenation would have made a string of Concat bytes.
type MemoryError struct {
	Grew, Concat, Limit uint64
}

func (e *MemoryError) Error() string {
	switch {
	case e.Concat > 0 && e.Grew > 0:
		return fmt.Sprintf("a string concatenation would make %s on top of the %s the node's live memory grew by while this call ran, over the rule memory limit of %s", FormatSize(e.Concat), FormatSize(e.Grew), FormatSize(e.Limit))
	case e.Concat > 0:
		return fmt.Sprintf("a string concatenation would make %s, over the rule memory limit of %s", FormatSize(e.Concat), FormatSize(e.Limit))
	}
	return fmt.Sprintf("the node's live memory grew by %s while this call ran, over the rule memory limit of %s", FormatSize(e.Grew), FormatSize(e.Limit))
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
// *MemoryError cause when it grows past the limit. end takes it off. The
// call's growth counts from the live heap of the last collection (see
// sandbox.callFrom for a fresh one).
func (w *memWatch) begin(ctx context.Context, limit uint64) (cctx context.Context, end func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	var m memSample
	m.read()
	c := &memCall{w: w, limit: limit, counted: m.allocated(), budget: limit, base: m.live(), cancel: cancel}
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

// admit is asked before an allocation of size bytes that happens inside
// one instruction (a concatenation), where the sampling cannot see it:
// it returns why the call must stop when size alone is over the limit, or
// when the call's live growth and size together are. It collects only
// when what was allocated since the last look and size pass the limit, as
// the watch would.
func (c *memCall) admit(size uint64) *MemoryError {
	if size > c.limit {
		return &MemoryError{Concat: size, Limit: c.limit}
	}
	var m memSample
	m.read()
	c.w.mu.Lock()
	look := m.allocated()+size > c.counted+c.budget
	c.w.mu.Unlock()
	if !look {
		return nil
	}
	runtime.GC()
	m.read()
	live := m.live()
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	c.looked(m.allocated(), live)
	if grew := live - c.base; grew+size > c.limit {
		return &MemoryError{Grew: grew, Concat: size, Limit: c.limit}
	}
	return nil
}

// settle looks once more as the call returns: between the watch's last
// look and the call's end it may have allocated up to a budget more, and
// what it returns (a file's rule table) is live. It collects only when
// the call allocated past its budget since the last look.
func (c *memCall) settle() *MemoryError {
	var m memSample
	m.read()
	c.w.mu.Lock()
	look := m.allocated() > c.counted+c.budget
	c.w.mu.Unlock()
	if !look {
		return nil
	}
	runtime.GC()
	m.read()
	live := m.live()
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	c.looked(m.allocated(), live)
	if grew := live - c.base; live > c.base && grew > c.limit {
		return &MemoryError{Grew: grew, Limit: c.limit}
	}
	return nil
}

// minBudget is the least budget, as a fraction of the limit (1/16).
const minBudget = 16

// looked records a collection's figures: the trigger counts again from
// allocated, with what is left of the limit as its budget. A base above
// the live heap now was taken when more was live (the collection before
// the call may have seen another call's data): it would let the call hold
// that much more. Lowering it forgives what the call holds now, at most
// about one limit, once. Called with w.mu held.
func (c *memCall) looked(allocated, live uint64) {
	c.counted = allocated
	c.base = min(c.base, live)
	grew := live - c.base
	c.budget = c.limit / minBudget
	if grew < c.limit {
		c.budget = max(c.limit-grew, c.budget)
	}
}

// stop ends c's call for err, before it allocates (concatenation).
func (c *memCall) stop(err *MemoryError) {
	c.w.mu.Lock()
	delete(c.w.calls, c)
	c.w.mu.Unlock()
	c.cancel(err)
}

// loop samples the runtime's counters while calls run.
func (w *memWatch) loop() {
	var m memSample
	tick := time.NewTicker(memorySampleEvery)
	defer tick.Stop()
	for range tick.C {
		m.read()
		w.mu.Lock()
		if len(w.calls) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		triggered := false
		for c := range w.calls {
			triggered = triggered || m.allocated() > c.counted+c.budget
		}
		w.mu.Unlock()
		if !triggered {
			continue
		}
		runtime.GC() // what is still live after a collection is kept
		m.read()
		live := m.live()
		w.mu.Lock()
		var culprit *memCall
		for c := range w.calls {
			c.looked(m.allocated(), live)
			if live > c.base && live-c.base > c.limit && (culprit == nil || c.seq > culprit.seq) {
				culprit = c
			}
		}
		if culprit != nil {
			delete(w.calls, culprit)
			culprit.cancel(&MemoryError{Grew: live - culprit.base, Limit: culprit.limit})
			for o := range w.calls {
				o.base = max(o.base, live)
			}
		}
		w.mu.Unlock()
	}
}

// memSample reads the runtime's counters.
type memSample [3]rtmetrics.Sample

func (m *memSample) read() {
	if m[0].Name == "" {
		m[0].Name = "/gc/heap/allocs:bytes"             // allocated since the process began
		m[1].Name = "/gc/heap/live:bytes"               // live after the last collection
		m[2].Name = "/memory/classes/heap/stacks:bytes" // goroutine stacks now
	}
	rtmetrics.Read(m[:])
}

func (m *memSample) value(i int) uint64 {
	if m[i].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return m[i].Value.Uint64()
}

func (m *memSample) allocated() uint64 { return m.value(0) + m.value(2) }
func (m *memSample) live() uint64      { return m.value(1) + m.value(2) }

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
