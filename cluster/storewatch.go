package cluster

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// raft's stores are wrapped so that a write that fails (a full disk, an
// I/O error) is counted and remembered with its text: raft itself only
// logs it, and a follower that cannot write its log looks healthy from
// everywhere else until the leader's poll (memberreport.go) reads it here.
// The error still goes back to raft unchanged; nothing else differs.

// writeHealth is the record of one kind of write (the Raft log and stable
// store, or snapshots).
type writeHealth struct {
	failures atomic.Uint64
	failing  atomic.Bool   // a failure is not yet recovered from; successes take the lock only then
	recovery time.Duration // Config.WriteRecovery
	now      func() time.Time

	mu      sync.Mutex
	lastErr string
	lastAt  time.Time // of lastErr
	okAt    time.Time // the latest success since then
	since   time.Time // the first failure of this stretch
}

// WriteHealth is what a member reports of one kind of write.
type WriteHealth struct {
	// Failures counts the failed writes since the node started.
	Failures uint64 `json:"failures"`
	// LastError is the latest failure's text, LastErrorAt its time (this
	// member's clock, UTC).
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// FailingSince is set while the member does not count as writing
	// again (Config.WriteRecovery after a success with no failure since): the
	// time of the first failure of this stretch (this member's clock, UTC).
	FailingSince time.Time `json:"failing_since,omitzero"`
}

// Failing reports whether the member's writes of this kind are failing.
func (w WriteHealth) Failing() bool { return !w.FailingSince.IsZero() }

func (h *writeHealth) clock() time.Time {
	if h.now != nil {
		return h.now()
	}
	return time.Now()
}

// record notes the outcome of one write and returns err unchanged.
func (h *writeHealth) record(err error) error {
	if err == nil {
		if h.failing.Load() {
			now := h.clock()
			h.mu.Lock()
			if h.okAt.IsZero() {
				h.okAt = now
			}
			h.mu.Unlock()
		}
		return nil
	}
	now := h.clock()
	h.failures.Add(1)
	h.mu.Lock()
	h.lastErr, h.lastAt, h.okAt = err.Error(), now, time.Time{}
	if !h.failing.Load() {
		h.since = now
		h.failing.Store(true)
	}
	h.mu.Unlock()
	return err
}

func (h *writeHealth) report() WriteHealth {
	now := h.clock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing.Load() && !h.okAt.IsZero() && now.Sub(h.okAt) >= h.recovery {
		h.failing.Store(false)
		h.since, h.okAt = time.Time{}, time.Time{}
	}
	return WriteHealth{Failures: h.failures.Load(), LastError: h.lastErr, LastErrorAt: h.lastAt.UTC(), FailingSince: h.since.UTC()}
}

// newStoreWatch records the writes of a node's stores; fault is
// Config.WriteFault.
func newStoreWatch(recovery time.Duration, fault func(store string) error) *storeWatch {
	w := &storeWatch{fault: fault}
	w.log.recovery, w.snapshot.recovery = recovery, recovery
	return w
}

// storeWatch holds the write records of a node's stores and the test hook
// that fails them.
type storeWatch struct {
	log, snapshot writeHealth
	// fault, when set (Config.WriteFault), is asked before every write; an
	// error fails the write as the disk would.
	fault func(store string) error
}

// The stores Config.WriteFault is asked about.
const (
	faultLog      = "log"      // StoreLog, StoreLogs, DeleteRange
	faultStable   = "stable"   // Set, SetUint64
	faultSnapshot = "snapshot" // Create, and each sink's Write
)

// injected is the test hook's error for a write to store, nil without one.
func (w *storeWatch) injected(store string) error {
	if w.fault == nil {
		return nil
	}
	return w.fault(store)
}

// logWrite runs one log or stable-store write and records its outcome.
func (w *storeWatch) logWrite(store string, write func() error) error {
	if err := w.injected(store); err != nil {
		return w.log.record(err)
	}
	return w.log.record(write())
}

// watchedLogStore is raft's log store and stable store with every write
// recorded in w.log; reads pass through.
type watchedLogStore struct {
	raft.LogStore
	stable raft.StableStore
	w      *storeWatch
	// appendSeconds, when set, times each append
	// (herald_raft_append_seconds).
	appendSeconds prometheus.Histogram
}

var (
	_ raft.LogStore    = watchedLogStore{}
	_ raft.StableStore = watchedLogStore{}
)

func (s watchedLogStore) StoreLog(l *raft.Log) error {
	return observe(s.appendSeconds, func() error {
		return s.w.logWrite(faultLog, func() error { return s.LogStore.StoreLog(l) })
	})
}

func (s watchedLogStore) StoreLogs(ls []*raft.Log) error {
	return observe(s.appendSeconds, func() error {
		return s.w.logWrite(faultLog, func() error { return s.LogStore.StoreLogs(ls) })
	})
}

func (s watchedLogStore) DeleteRange(lo, hi uint64) error {
	return s.w.logWrite(faultLog, func() error { return s.LogStore.DeleteRange(lo, hi) })
}

func (s watchedLogStore) Set(k, v []byte) error {
	return s.w.logWrite(faultStable, func() error { return s.stable.Set(k, v) })
}

func (s watchedLogStore) SetUint64(k []byte, v uint64) error {
	return s.w.logWrite(faultStable, func() error { return s.stable.SetUint64(k, v) })
}

func (s watchedLogStore) Get(k []byte) ([]byte, error) { return s.stable.Get(k) }

func (s watchedLogStore) GetUint64(k []byte) (uint64, error) { return s.stable.GetUint64(k) }

// watchedSnapshots is a snapshot store whose sinks record every write in
// w.snapshot: a snapshot counts as written when its sink closes without
// error.
type watchedSnapshots struct {
	raft.SnapshotStore
	w *storeWatch
}

func (s watchedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	if err := s.w.injected(faultSnapshot); err != nil {
		return nil, s.w.snapshot.record(err)
	}
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, s.w.snapshot.record(err)
	}
	return &watchedSink{SnapshotSink: sink, w: s.w}, nil
}

// watchedSink records a snapshot's first failed write, or its close.
type watchedSink struct {
	raft.SnapshotSink
	w      *storeWatch
	failed bool // a write failed: one failure per snapshot, and no success at Close
}

func (s *watchedSink) Write(p []byte) (int, error) {
	if err := s.w.injected(faultSnapshot); err != nil {
		return 0, s.fail(err)
	}
	n, err := s.SnapshotSink.Write(p)
	if err != nil {
		return n, s.fail(err)
	}
	return n, nil
}

func (s *watchedSink) fail(err error) error {
	if !s.failed {
		s.failed = true
		_ = s.w.snapshot.record(err)
	}
	return err
}

func (s *watchedSink) Close() error {
	err := s.SnapshotSink.Close()
	if err != nil {
		return s.fail(err)
	}
	if !s.failed {
		_ = s.w.snapshot.record(nil)
	}
	return nil
}

var _ io.WriteCloser = (*watchedSink)(nil)
