package main

import (
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"testing"

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

// TestApplyGCPercent: gc_percent sets the collector, and GOGC in the
// environment (even empty) leaves it alone. Not parallel: both are the
// process's.
func TestApplyGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	t.Setenv("GOGC", "") // restored after the test
	require.NoError(t, os.Unsetenv("GOGC"))
	applyGCPercent(nodeConfig{GCPercent: "75"}, log)
	require.Equal(t, 75, debug.SetGCPercent(100))
	applyGCPercent(nodeConfig{}, log)
	require.Equal(t, gcPercentDefault, debug.SetGCPercent(100))

	t.Setenv("GOGC", "200")
	applyGCPercent(nodeConfig{GCPercent: "75"}, log)
	require.Equal(t, 100, debug.SetGCPercent(100), "gc_percent overrode GOGC")
}
