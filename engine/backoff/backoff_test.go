package backoff

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDoubling(t *testing.T) {
	t.Parallel()
	b := Doubling{Min: time.Second, Max: 5 * time.Second}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}, got)
	b.Reset()
	require.Equal(t, time.Second, b.Next())
	require.Equal(t, time.Duration(0), b.After(0))
	require.Equal(t, 5*time.Second, b.After(1000), "no overflow for long failure runs")
	require.Equal(t, time.Duration(0), (&Doubling{}).Next(), "the zero value waits nothing")
}

func TestSleepStopsEarly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.False(t, Sleep(ctx, time.Hour, nil))
	stop := make(chan struct{})
	close(stop)
	require.False(t, Sleep(context.Background(), time.Hour, stop))
	require.True(t, Sleep(context.Background(), time.Nanosecond, nil))
}
