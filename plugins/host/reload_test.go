package host

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/plugins/mock"
)

// TestReloadAddsRemovesAndChangesChannels: a reload starts an added
// channel, keeps an unchanged one's process, and lets a changed channel's
// batch in flight finish on the old plugin before that stops, while new
// batches go to the new one.
func TestReloadAddsRemovesAndChangesChannels(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]ChannelConfig{
		"keep":   mockChannel(nil),
		"slow":   mockChannel(map[string]any{"send_delay": "1s"}),
		"remove": mockChannel(nil),
	}, nil)
	keepPid, slowPid := b.h.Pid("keep"), b.h.Pid("slow")
	require.NotZero(t, slowPid)

	inflight := make(chan error, 1)
	var out []heraldtype.Result
	go func() {
		var err error
		out, err = b.h.Send(context.Background(), "slow", outgoing(2, "old"))
		inflight <- err
	}()
	// The batch is in the old plugin before the reload swaps it out.
	poll := func(cond func() bool, what string) { eventually(t, cond, what) }
	poll(func() bool { return b.h.channel("slow").inflightN() == 1 }, "the slow batch in flight")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := b.h.Reload(ctx, map[string]ChannelConfig{
		"keep":  {Plugin: "mock", Config: map[string]any{"outbox": b.outbox("keep")}},
		"slow":  {Plugin: "mock", Config: map[string]any{"outbox": b.outbox("slow")}}, // no delay now
		"added": {Plugin: "mock", Config: map[string]any{"outbox": b.outbox("added")}},
	}, nil)
	require.NoError(t, err)
	require.Equal(t, ReloadResult{Added: []string{"added"}, Removed: []string{"remove"}, Changed: []string{"slow"}}, res)
	require.Equal(t, keepPid, b.h.Pid("keep"), "an unchanged channel keeps its plugin")
	require.NotEqual(t, slowPid, b.h.Pid("slow"), "a changed channel runs a new plugin")
	require.True(t, alive(slowPid), "the old plugin still runs its batch")

	batch := outgoing(1, "added")
	sent, err := b.h.Send(ctx, "added", batch)
	require.NoError(t, err)
	requireAllSent(t, batch, sent)
	_, err = b.h.Send(ctx, "remove", batch)
	require.ErrorIs(t, err, ErrUnknownChannel)

	require.NoError(t, <-inflight, "the batch in flight finishes on the old plugin")
	require.Len(t, out, 2)
	poll(func() bool { return !alive(slowPid) }, "the old plugin stops after its batch")
	recs, err := mock.ReadOutbox(b.outbox("slow"))
	require.NoError(t, err)
	require.Len(t, recs, 2)
	names := []string{}
	for _, st := range b.h.Status() {
		names = append(names, st.Name)
	}
	require.Equal(t, []string{"added", "keep", "slow"}, names)
}

// TestReloadRefusesBadConfigAndChangesNothing: one bad channel refuses
// the whole reload.
func TestReloadRefusesBadConfigAndChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]ChannelConfig{"m": mockChannel(nil)}, nil)
	pid := b.h.Pid("m")
	_, err := b.h.Reload(context.Background(), map[string]ChannelConfig{
		"m":   {Plugin: "mock", Config: map[string]any{"outbox": filepath.Join(b.dir, "other.jsonl")}},
		"bad": {Plugin: "nosuch"},
	}, nil)
	require.ErrorIs(t, err, ErrUnknownPlugin)
	require.Equal(t, pid, b.h.Pid("m"))
	require.Len(t, b.h.Status(), 1)
}
