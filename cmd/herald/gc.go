package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/heraldhq/herald/rules"
)

// gcPercentDefault is gc_percent's default: the heap may grow half past
// what is live before Go collects, not Go's own 100 (double). A node's
// heap is mostly the replicated state, which every node holds and which
// only grows: at 100 its resident set was about twice that state. herald
// bench burst, a million people of nine columns and 500,000 sent: peak
// RSS 1,009 / 952 / 882 MiB at 100, 714 / 664 / 666 MiB at 50.
const gcPercentDefault = 50

// The range of gc_percent: below 10 the collector would run nearly all
// the time; above 1000 a node would hold eleven times its state.
const (
	minGCPercent = 10
	maxGCPercent = 1000
)

// parseGCPercent reads gc_percent ("" is the default).
func parseGCPercent(s string) (int, error) {
	if strings.TrimSpace(s) == "" {
		return gcPercentDefault, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < minGCPercent || n > maxGCPercent {
		return 0, fmt.Errorf("want a whole number from %d to %d (percent the heap may grow past what is live; default %d)", minGCPercent, maxGCPercent, gcPercentDefault)
	}
	return n, nil
}

// gcHeadroomDefault is gc_headroom's default: the heap may always grow
// this far past what is live, whatever gc_percent says. Half of a small
// heap is a few megabytes, and a collector that runs every few megabytes
// spends the 9:00 burst collecting: a 100,000-person burst, whose live
// heap is under 100 MiB, went from 2.9 s at Go's 100 to 3.6–4.5 s at 50.
// Past twice this, gc_percent alone decides, which is what holds a
// million people or ten million tasks to half again their size.
const gcHeadroomDefault = 128 << 20

// maxTunedPercent bounds the percent the headroom asks for when almost
// nothing is live (a node just started).
const maxTunedPercent = 100_000

// parseGCHeadroom reads gc_headroom ("" is the default, 0 none).
func parseGCHeadroom(s string) (uint64, error) {
	switch strings.TrimSpace(s) {
	case "":
		return gcHeadroomDefault, nil
	case "0":
		return 0, nil
	}
	n, err := parseSize(s, 1<<20)
	if err != nil {
		return 0, fmt.Errorf("%w (or 0 for none; default %s)", err, rules.FormatSize(gcHeadroomDefault))
	}
	return n, nil
}

// applyGCPercent sets the process's collector from gc_percent and
// gc_headroom, unless GOGC is set in its environment: the operator's word
// for Go wins (and GOGC=off stays off). It returns the tuner it started,
// if any.
func applyGCPercent(cfg nodeConfig, log *slog.Logger) *gcTuner {
	if env, ok := os.LookupEnv("GOGC"); ok {
		if cfg.GCPercent != "" || cfg.GCHeadroom != "" {
			log.Warn("GOGC is set: gc_percent and gc_headroom are left alone", "GOGC", env, "gc_percent", cfg.GCPercent, "gc_headroom", cfg.GCHeadroom)
		}
		return nil
	}
	p, _ := parseGCPercent(cfg.GCPercent)   // validated by load
	h, _ := parseGCHeadroom(cfg.GCHeadroom) // likewise
	debug.SetGCPercent(p)
	if h == 0 {
		return nil
	}
	return startGCTuner(p, h, debug.SetGCPercent)
}

// gcTuner sets the collector's percent after every collection to what
// lets the heap grow the larger of percent past what is live and
// headroom: Go's GOGC is a ratio only, with no floor in bytes. It runs on
// the finalizer goroutine, woken by a sentinel object that each
// collection finds unreachable (written by hand: no kept library does
// this; the runtime has no hook at the end of a cycle).
type gcTuner struct {
	percent  int
	headroom uint64
	set      func(int) int
	live     []metrics.Sample
	last     atomic.Int64 // the percent set last
	stopped  atomic.Bool
}

// gcSentinel is allocated to be found unreachable by the next
// collection. It holds a pointer so that it is not a tiny allocation,
// whose finalizer may wait for its neighbours.
type gcSentinel struct {
	_ *int
	_ [16]byte
}

func startGCTuner(percent int, headroom uint64, set func(int) int) *gcTuner {
	g := &gcTuner{percent: percent, headroom: headroom, set: set,
		live: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	g.last.Store(int64(percent))
	g.arm()
	return g
}

func (g *gcTuner) arm() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		if g.stopped.Load() {
			return
		}
		g.tune()
		g.arm()
	})
}

// tune sets the percent for the heap live after the last collection.
func (g *gcTuner) tune() {
	metrics.Read(g.live)
	if g.live[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	p := g.percentFor(g.live[0].Value.Uint64())
	if int64(p) != g.last.Load() {
		g.set(p)
		g.last.Store(int64(p))
	}
}

// percentFor is the percent that lets a heap of live bytes grow by the
// larger of g.percent and g.headroom.
func (g *gcTuner) percentFor(live uint64) int {
	if live == 0 {
		return g.percent
	}
	need := (g.headroom*100 + live - 1) / live
	return max(g.percent, int(min(need, maxTunedPercent)))
}

// stop ends the tuning at the next collection (tests).
func (g *gcTuner) stop() { g.stopped.Store(true) }
