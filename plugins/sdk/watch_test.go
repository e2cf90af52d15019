package sdk

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWatchPipeExitsWhenHostEndCloses(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	exited := make(chan int, 1)
	go watchPipe(r, slog.New(slog.DiscardHandler), func(code int) { exited <- code })

	select {
	case <-exited:
		t.Fatal("exited while the host's end was open")
	default:
	}
	require.NoError(t, w.Close())
	select {
	case code := <-exited:
		require.Zero(t, code)
	case <-time.After(10 * time.Second):
		t.Fatal("did not exit after the host's end closed")
	}
}
