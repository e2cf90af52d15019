package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
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

// applyGCPercent sets the process's collector from gc_percent, unless
// GOGC is set in its environment: the operator's word for Go wins (and
// GOGC=off stays off).
func applyGCPercent(cfg nodeConfig, log *slog.Logger) {
	if env, ok := os.LookupEnv("GOGC"); ok {
		if cfg.GCPercent != "" {
			log.Warn("GOGC is set: gc_percent is left alone", "GOGC", env, "gc_percent", cfg.GCPercent)
		}
		return
	}
	p, _ := parseGCPercent(cfg.GCPercent) // validated by load
	debug.SetGCPercent(p)
}
