package sdk

import (
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readSignal reports each Read that begins on r, so that a test knows
// where the reader stands instead of guessing.
type readSignal struct {
	r      io.Reader
	starts chan struct{}
}

func (s *readSignal) Read(p []byte) (int, error) {
	s.starts <- struct{}{}
	return s.r.Read(p)
}

func TestWatchPipeExitsWhenHostEndCloses(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	exited := make(chan int, 1)
	reads := &readSignal{r: r, starts: make(chan struct{}, 8)}
	go watchPipe(reads, slog.New(slog.DiscardHandler), func(code int) { exited <- code })

	// While the host's end is open, the watcher reads on: bytes on the
	// pipe (the host never writes any, but must not end the plugin if it
	// did) are followed by another Read, and no exit.
	waitRead := func(what string) {
		t.Helper()
		select {
		case <-reads.starts:
		case code := <-exited:
			t.Fatalf("exited (code %d) while the host's end was open, %s", code, what)
		case <-time.After(10 * time.Second):
			t.Fatalf("no Read %s", what)
		}
	}
	waitRead("at the start")
	_, err = w.Write([]byte("x"))
	require.NoError(t, err)
	waitRead("after a byte arrived")
	require.Empty(t, exited)

	require.NoError(t, w.Close())
	select {
	case code := <-exited:
		require.Zero(t, code)
	case <-time.After(10 * time.Second):
		t.Fatal("did not exit after the host's end closed")
	}
}
