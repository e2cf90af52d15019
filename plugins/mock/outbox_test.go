package mock

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
)

// TestFailedWriteIsNotRemembered: a batch whose outbox write failed (a full
// disk) was not delivered, and its retry must be, not be taken for a
// duplicate of a delivery that never happened.
func TestFailedWriteIsNotRemembered(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outbox.jsonl")
	c := &Channel{Logger: slog.New(slog.DiscardHandler)}
	require.NoError(t, c.Configure(context.Background(), json.RawMessage(`{"outbox":`+string(must(json.Marshal(path)))+`}`)))
	t.Cleanup(func() { _ = c.Close() })
	m := sdk.Message{ID: "id-1", IdempotencyKey: "k1", Recipient: "alice", Payload: json.RawMessage(`{}`), Attempt: 1}

	// Writes fail: the outbox handle is swapped for a read-only one.
	ro, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ro.Close() })
	c.mu.Lock()
	rw := c.out.f
	c.out.f = ro
	c.mu.Unlock()
	_, err = c.Send(context.Background(), []sdk.Message{m})
	require.Error(t, err)

	c.mu.Lock()
	c.out.f = rw
	c.mu.Unlock()
	m.Attempt = 2
	res, err := c.Send(context.Background(), []sdk.Message{m})
	require.NoError(t, err)
	require.Equal(t, sdk.StatusSent, res[0].Status)
	recs, err := ReadOutbox(path)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"k1": 1}, Delivered(recs), "the retry is the delivery")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Issue 19: the outbox, which holds every message's content, was created
// 0644. It is 0600, and one an older build left 0644 is narrowed.
func TestOutboxIsPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fresh := filepath.Join(dir, "new.jsonl")
	old := filepath.Join(dir, "old.jsonl")
	require.NoError(t, os.WriteFile(old, nil, 0o644))
	require.NoError(t, os.Chmod(old, 0o644)) // whatever the umask
	for _, path := range []string{fresh, old} {
		o, err := openOutbox(path)
		require.NoError(t, err)
		require.NoError(t, o.f.Close())
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), path)
	}
}
