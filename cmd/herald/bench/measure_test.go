package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPercentileNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := summarise(ds)
	require.Equal(t, latencies{N: 100, First: 1, P50: 50, P99: 99, Max: 100}, s)
	require.Equal(t, latencies{N: 1, First: 7, P50: 7, P99: 7, Max: 7}, summarise([]time.Duration{7 * time.Millisecond}))
	require.Equal(t, latencies{}, summarise(nil))
}

func TestOutboxTailReadsOnlyCompleteNewLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.jsonl")
	tail := &outboxTail{path: path}
	recs, err := tail.poll()
	require.NoError(t, err)
	require.Empty(t, recs, "a missing outbox is empty")

	line := func(key string) string {
		return `{"key":"` + key + `","received_at":"2026-12-01T09:00:00.5+08:00","duplicate":false,"payload":{"content":"r@2026-12-01T01:00:00Z"}}` + "\n"
	}
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteString(line("a") + line("b")[:20])
	require.NoError(t, err)
	recs, err = tail.poll()
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "a", recs[0].Key)

	_, err = f.WriteString(line("b")[20:] + "not json\n" + line("c"))
	require.NoError(t, err)
	recs, err = tail.poll()
	require.NoError(t, err)
	require.Len(t, recs, 2, "the torn line completed, the foreign one skipped")
	require.Equal(t, "b", recs[0].Key)
	require.Equal(t, "c", recs[1].Key)
	slot, ok := runSlot(recs[1].Payload.Content)
	require.True(t, ok)
	require.Equal(t, time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC), slot)
	require.Equal(t, 500*time.Millisecond, recs[1].ReceivedAt.Sub(slot))
}
