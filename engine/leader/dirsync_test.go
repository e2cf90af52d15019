package leader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// fakeDirectory is a DirectorySource a test steers.
type fakeDirectory struct {
	mu    sync.Mutex
	ids   []string
	err   error
	calls int
}

func (f *fakeDirectory) set(err error, ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.ids = err, ids
}

func (f *fakeDirectory) Fetch(context.Context) (DirectoryFetch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return DirectoryFetch{}, f.err
	}
	d := dirBody(slices.Clone(f.ids)...)
	return DirectoryFetch{Source: d.Source, Body: d.Body, Hash: d.Hash, UserIDs: d.UserIDs}, nil
}

func TestDirectoryRefresher(t *testing.T) {
	t.Parallel()
	b := setupLeader(t)
	src := &fakeDirectory{}
	now := t0
	b.leader.cfg.Directory = src
	b.leader.cfg.NowFunc = func() time.Time { return now }
	r := &dirRefresher{l: b.leader}
	ctx := context.Background()
	fsm := b.log.fsm
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = fmt.Sprintf("u%02d", i)
	}

	src.set(nil, ids...)
	next := r.runOnce(ctx)
	require.Equal(t, now.Add(DirectoryIntervalDefault), next)
	cur, _ := fsm.Directory()
	require.Equal(t, ids, cur.UserIDs)
	require.Equal(t, next, r.runOnce(ctx), "not due: no fetch")
	require.Equal(t, 1, src.calls)

	// Three failures in a row: the snapshot in force stays, one alert.
	src.set(errors.New("wecom /cgi-bin/user/simplelist: errcode -1: system busy"))
	for range 3 {
		now = next
		next = r.runOnce(ctx)
		require.Equal(t, now.Add(DirectoryRetry), next, "a failure retries sooner")
	}
	got, _ := fsm.Directory()
	require.Equal(t, cur, got)
	al, ok := fsm.Alert(engine.AlertID(engine.AlertDirectoryRefresh))
	require.True(t, ok)
	require.Equal(t, 1, al.Count, "one alert per failure streak")
	require.Contains(t, al.Message, "system busy")
	require.Equal(t, engine.AlertDirectory, al.Kind)
	require.Contains(t, al.Params.Error, "system busy")
	require.Contains(t, al.Message, "last good snapshot stays in force ("+cur.Hash)

	// Recovered, and one person moved out: within the share, applied.
	src.set(nil, ids[1:]...)
	now = next
	next = r.runOnce(ctx)
	cur, _ = fsm.Directory()
	require.Equal(t, ids[1:], cur.UserIDs)

	// Three of nine gone (33%) is over 20%: held, the snapshot stays.
	src.set(nil, ids[4:]...)
	now = next
	next = r.runOnce(ctx)
	got, held := fsm.Directory()
	require.Equal(t, cur, got)
	require.NotNil(t, held)
	require.Equal(t, []string{"u01", "u02", "u03"}, held.Removed)
	now = next
	next = r.runOnce(ctx)
	_, again := fsm.Directory()
	require.Same(t, held, again, "the same refresh is not held twice")
	al, _ = fsm.Alert(engine.AlertID(engine.AlertDirectoryHeld))
	require.Equal(t, 1, al.Count)

	// WeCom goes back to what is in force: the hold is moot.
	src.set(nil, ids[1:]...)
	now = next
	next = r.runOnce(ctx)
	got, held = fsm.Directory()
	require.Equal(t, cur.Hash, got.Hash)
	require.Nil(t, held)

	// Held again, then confirmed by an operator.
	src.set(nil, ids[4:]...)
	now = next
	r.runOnce(ctx)
	_, held = fsm.Directory()
	require.NotNil(t, b.log.fsm.Apply(1000, 1, mustEncode(t, engine.CmdConfirmDirectory, engine.ConfirmDirectory{Hash: held.Hash, By: "op", Now: now})))
	cur, held = fsm.Directory()
	require.Nil(t, held)
	require.Equal(t, ids[4:], cur.UserIDs)
}

// A refresher waiting out its interval wakes up now and then (its timer is
// capped, the clock may be a test's); only a wake-up by hand refreshes
// before the interval ends. (A wake-up by the cap used to count as one by
// hand: WeCom was read every minute, not every 10.)
func TestDirectoryRefresherKeepsItsInterval(t *testing.T) {
	t.Parallel()
	b := setupLeader(t)
	src := &fakeDirectory{}
	src.set(nil, "a", "b")
	refresh := make(chan struct{})
	b.leader.cfg.Directory, b.leader.cfg.DirectoryRefresh = src, refresh
	b.leader.cfg.NowFunc = func() time.Time { return t0 } // the interval never ends
	woke := make(chan struct{})
	r := &dirRefresher{l: b.leader, maxWait: time.Millisecond, woke: woke}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.run(ctx)
	}()
	deadline := time.After(10 * time.Second)
	for range 5 {
		select {
		case <-woke:
		case <-deadline:
			t.Fatal("the refresher did not wake up")
		}
	}
	src.mu.Lock()
	calls := src.calls
	src.mu.Unlock()
	require.Equal(t, 1, calls, "capped wake-ups do not refresh")
	// Ask by hand, draining wake-ups until the refresher takes the ask.
	for asked := false; !asked; {
		select {
		case refresh <- struct{}{}:
			asked = true
		case <-woke:
		case <-deadline:
			t.Fatal("the refresher did not take the refresh")
		}
	}
	<-woke
	<-woke // the refresh by hand ran in between
	src.mu.Lock()
	calls = src.calls
	src.mu.Unlock()
	require.Equal(t, 2, calls)
	cancel()
	for {
		select {
		case <-done:
			return
		case <-woke:
		}
	}
}

// dirBody is a SetDirectory of ids (as the engine's directory_test.go
// builds it).
func dirBody(ids ...string) engine.SetDirectory {
	slices.Sort(ids)
	body := fmt.Sprintf(`{"source":"test","people":[%q]}`, strings.Join(ids, ","))
	return engine.SetDirectory{Hash: "h-" + strings.Join(ids, "-"), Source: "test", Body: []byte(body), UserIDs: ids, FetchedAt: t0, Now: t0}
}
