package main

import (
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseGCPercent(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{"": gcPercentDefault, "10": 10, " 75 ": 75, "1000": 1000} {
		got, err := parseGCPercent(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"9", "1001", "off", "-1", "50%", "0"} {
		_, err := parseGCPercent(in)
		require.ErrorContains(t, err, "want a whole number from 10 to 1000", in)
	}
	c := nodeConfig{NodeID: "n1", DataDir: "d", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2", GCPercent: "5"}
	require.ErrorContains(t, c.validate(), `config: gc_percent "5"`)
}

// TestApplyGCPercent: gc_percent sets the collector, gc_headroom starts
// the tuner, and GOGC in the environment (even empty) leaves both alone.
// Not parallel: both are the process's.
func TestApplyGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	t.Setenv("GOGC", "") // restored after the test
	require.NoError(t, os.Unsetenv("GOGC"))
	require.Nil(t, applyGCPercent(nodeConfig{GCPercent: "75", GCHeadroom: "0"}, log))
	require.Equal(t, 75, debug.SetGCPercent(100))
	g := applyGCPercent(nodeConfig{}, log)
	require.NotNil(t, g, "the default headroom starts the tuner")
	g.stop()
	// gc_percent, or more if a collection woke the tuner meanwhile.
	require.GreaterOrEqual(t, debug.SetGCPercent(100), gcPercentDefault)
	require.Equal(t, gcPercentDefault, g.percent)
	require.Equal(t, uint64(gcHeadroomDefault), g.headroom)

	t.Setenv("GOGC", "200")
	require.Nil(t, applyGCPercent(nodeConfig{GCPercent: "75", GCHeadroom: "1GiB"}, log))
	require.Equal(t, 100, debug.SetGCPercent(100), "gc_percent overrode GOGC")
}

func TestParseGCHeadroom(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]uint64{"": gcHeadroomDefault, "0": 0, " 64MiB ": 64 << 20, "1GiB": 1 << 30, "2048KiB": 2 << 20} {
		got, err := parseGCHeadroom(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"512KiB", "1MB", "-1MiB", "lots", "1.5GiB"} {
		_, err := parseGCHeadroom(in)
		require.ErrorContains(t, err, "want a size of at least 1MiB", in)
	}
	c := nodeConfig{NodeID: "n1", DataDir: "d", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2", GCHeadroom: "lots"}
	require.ErrorContains(t, c.validate(), `config: gc_headroom "lots"`)
}

func TestGCTunerPercentFor(t *testing.T) {
	t.Parallel()
	g := &gcTuner{percent: 50, headroom: 128 << 20}
	for live, want := range map[uint64]int{
		0:         50,              // nothing read yet
		1:         maxTunedPercent, // bounded
		64 << 20:  200,             // 128 MiB past 64 MiB live
		100 << 20: 128,
		256 << 20: 50, // from here gc_percent decides
		4 << 30:   50,
	} {
		require.Equal(t, want, g.percentFor(live), "live %d", live)
	}
}

// TestGCTunerFollowsTheLiveHeap: after collections the tuner asks for
// the headroom's percent while little is live, and for gc_percent once
// the live heap is more than twice the headroom. It sets through a func
// of the test's, not the process's collector.
func TestGCTunerFollowsTheLiveHeap(t *testing.T) {
	var set atomic.Int64
	g := startGCTuner(50, 16<<20, func(p int) int { set.Store(int64(p)); return 0 })
	t.Cleanup(g.stop)
	waitPercent := func(ok func(int64) bool, what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok(set.Load()) {
			require.True(t, time.Now().Before(deadline), "%s: the tuner set %d", what, set.Load())
			runtime.GC() // each collection wakes the tuner
			runtime.Gosched()
		}
	}
	waitPercent(func(p int64) bool { return p > 50 }, "little live")
	ballast := make([]byte, 128<<20)
	waitPercent(func(p int64) bool { return p == 50 }, "128 MiB live")
	runtime.KeepAlive(ballast)
}
