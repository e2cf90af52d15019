package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// fakeStore is a log and stable store whose writes fail while err is set.
type fakeStore struct {
	*raft.InmemStore
	err error
}

func (s *fakeStore) StoreLogs(ls []*raft.Log) error {
	if s.err != nil {
		return s.err
	}
	return s.InmemStore.StoreLogs(ls)
}

func (s *fakeStore) SetUint64(k []byte, v uint64) error {
	if s.err != nil {
		return s.err
	}
	return s.InmemStore.SetUint64(k, v)
}

// A failed write goes back to raft unchanged and is counted with its text
// and the time the failing began; writes that succeed for WriteRecovery
// with none failing end the failing, not the count.
func TestWatchedLogStoreRecordsFailedWrites(t *testing.T) {
	fake := &fakeStore{InmemStore: raft.NewInmemStore()}
	now := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	w := newStoreWatch(30*time.Second, nil)
	w.log.now = func() time.Time { return now }
	s := watchedLogStore{LogStore: fake, stable: fake, w: w}

	require.NoError(t, s.StoreLogs([]*raft.Log{{Index: 1, Data: []byte("a")}}))
	require.False(t, w.log.report().Failing())

	full := errors.New("write raft.db: no space left on device")
	fake.err = full
	err := s.StoreLogs([]*raft.Log{{Index: 2}})
	require.ErrorIs(t, err, full, "raft gets the store's own error")
	first := w.log.report()
	require.True(t, first.Failing())
	require.Equal(t, uint64(1), first.Failures)
	require.Equal(t, full.Error(), first.LastError)
	require.Equal(t, now, first.FailingSince)

	now = now.Add(time.Second)
	require.ErrorIs(t, s.SetUint64([]byte("CurrentTerm"), 2), full, "stable-store writes count as log writes")
	second := w.log.report()
	require.Equal(t, uint64(2), second.Failures)
	require.Equal(t, first.FailingSince, second.FailingSince, "failing since the first failure")
	require.Equal(t, now, second.LastErrorAt)

	// On a full disk some writes still fit between failures.
	fake.err = nil
	require.NoError(t, s.StoreLogs([]*raft.Log{{Index: 2, Data: []byte("b")}}))
	now = now.Add(w.log.recovery - time.Second)
	require.True(t, w.log.report().Failing(), "one write that fits is no recovery")
	fake.err = full
	require.Error(t, s.StoreLogs([]*raft.Log{{Index: 3}}))
	fake.err = nil
	require.NoError(t, s.StoreLogs([]*raft.Log{{Index: 3, Data: []byte("c")}}))
	now = now.Add(w.log.recovery - time.Second)
	require.True(t, w.log.report().Failing(), "a failure in between starts the wait again")
	require.Equal(t, first.FailingSince, w.log.report().FailingSince)
	now = now.Add(time.Second)
	healed := w.log.report()
	require.False(t, healed.Failing(), "writing again for w.log.recovery")
	require.Equal(t, uint64(3), healed.Failures, "the count stays")
	require.Equal(t, full.Error(), healed.LastError, "and so does the last error")
	var got raft.Log
	require.NoError(t, s.GetLog(3, &got))
	require.Equal(t, "c", string(got.Data), "reads pass through")
}

// The test hook fails every write before it reaches the store.
func TestWriteFaultFailsWrites(t *testing.T) {
	fake := &fakeStore{InmemStore: raft.NewInmemStore()}
	hook := errors.New("injected")
	var asked []string
	w := &storeWatch{fault: func(store string) error { asked = append(asked, store); return hook }}
	s := watchedLogStore{LogStore: fake, stable: fake, w: w}
	require.ErrorIs(t, s.StoreLog(&raft.Log{Index: 1}), hook)
	require.ErrorIs(t, s.Set([]byte("k"), []byte("v")), hook)
	require.ErrorIs(t, s.DeleteRange(1, 1), hook)
	require.Equal(t, uint64(3), w.log.report().Failures)
	require.Equal(t, []string{"log", "stable", "log"}, asked)
	_, err := fake.Get([]byte("k"))
	require.Error(t, err, "nothing reached the store")
}

// failingSink fails its writes while err is set.
type failingSink struct {
	raft.SnapshotSink
	err            error
	closed, cancel bool
}

func (s *failingSink) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	return len(p), nil
}
func (s *failingSink) Close() error  { s.closed = true; return nil }
func (s *failingSink) Cancel() error { s.cancel = true; return nil }

// A snapshot counts as failed once, at its first failed write, and as
// written only when its sink closes after no failure.
func TestWatchedSinkRecordsFailedSnapshots(t *testing.T) {
	w := newStoreWatch(30*time.Second, nil)
	full := errors.New("write state.bin: no space left on device")
	inner := &failingSink{err: full}
	sink := &watchedSink{SnapshotSink: inner, w: w}
	_, err := sink.Write([]byte("x"))
	require.ErrorIs(t, err, full)
	_, err = sink.Write([]byte("y"))
	require.ErrorIs(t, err, full)
	require.NoError(t, sink.Cancel())
	require.True(t, inner.cancel)
	r := w.snapshot.report()
	require.True(t, r.Failing())
	require.Equal(t, uint64(1), r.Failures)
	require.Equal(t, full.Error(), r.LastError)

	ok := &watchedSink{SnapshotSink: &failingSink{}, w: w}
	_, err = ok.Write([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, ok.Close())
	now := time.Now().Add(w.snapshot.recovery)
	w.snapshot.now = func() time.Time { return now }
	require.False(t, w.snapshot.report().Failing(), "a snapshot written ends the failing (after WriteRecovery)")
	require.Equal(t, uint64(1), w.snapshot.report().Failures)
}
