package cluster

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/engine"
)

// StateMachine is the replicated state machine cluster wraps as a raft.FSM.
// engine.FSM implements it; cluster depends on nothing else of the engine's
// state.
type StateMachine interface {
	// Apply applies one committed command. It panics (stopping the node
	// loudly) on an unknown or undecodable command: diverging silently
	// would be worse.
	Apply(index, term uint64, cmd []byte) any
	// Snapshot captures an immutable view of the state; the returned
	// Snapshot's Persist does the slow work off the apply path.
	Snapshot() (engine.Snapshot, error)
	// Restore replaces the whole state with one read from r.
	Restore(r io.Reader) error
	// Members lists the replicated member records.
	Members() []engine.Member
	// RemovedMember is the record of removed member id, if it is one
	// (removed.go).
	RemovedMember(id string) (engine.RemovedMember, bool)
	// Admit checks a command before the leader proposes it: it returns the
	// command to propose (possibly written as an older body version) or an
	// error when some member's build could not apply it
	// (engine.ErrMembersBehind), so a rolling upgrade never stops a node.
	Admit(cmd []byte) ([]byte, error)
}

// fsm adapts a StateMachine to raft.FSM.
type fsm struct {
	sm StateMachine

	// restoreErr is the last Restore failure (at start, the first: the
	// newest snapshot's). raft only logs it and, when no snapshot on disk
	// can be restored, fails NewRaft with "failed to load any existing
	// snapshots"; New adds this cause to that error.
	mu         sync.Mutex
	restoreErr error
	// While New starts raft: the first index of the log on disk, and the
	// snapshot raft opened last (see snapshotWatch). raft falls back to an
	// older snapshot when the newest cannot be restored (one a newer build
	// wrote, a damaged file); if the log was compacted past that older
	// one, raft then panics on the missing entries ("log not found"),
	// saying nothing of the cause. Restore refuses such a fallback, so New
	// fails with the newest snapshot's reason.
	starting   bool
	firstIndex uint64
	opened     *raft.SnapshotMeta
	// dataDir names files in messages; fileDamaged: at start, raft could
	// not open the newest snapshot's file (its CRC, or the file is gone).
	dataDir     string
	fileDamaged bool

	// appliedBytes and appliedEntries count the commands applied since the
	// node started (herald_raft_applied_bytes_total): what the log carries
	// is what every member writes, sends and applies.
	appliedBytes, appliedEntries atomic.Uint64
	// snapshotSeconds, when set, times each snapshot from its capture to
	// its file closed (herald_snapshot_duration_seconds).
	snapshotSeconds prometheus.Histogram
}

var _ raft.FSM = (*fsm)(nil)

// Apply hands a committed command to the state machine. raft only calls it
// for LogCommand entries today; the type check keeps a future raft log type
// from ever reaching the engine's decoder (which would stop the node).
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	f.appliedBytes.Add(uint64(len(l.Data)))
	f.appliedEntries.Add(1)
	return f.sm.Apply(l.Index, l.Term, l.Data)
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	start := time.Now()
	s, err := f.sm.Snapshot()
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{s: s, start: start, seconds: f.snapshotSeconds}, nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if err := f.refuseFallback(); err != nil {
		return err
	}
	err := f.sm.Restore(rc)
	f.mu.Lock()
	if !f.starting || f.restoreErr == nil {
		f.restoreErr = err
	}
	f.mu.Unlock()
	return err
}

// refuseFallback refuses, at start, a snapshot standing in for a newer
// one: when the newer one's file is damaged (the data dir is no longer
// what this node acknowledged; the error says how to wipe and rejoin), or
// when the log no longer reaches from this one (the entries after it were
// compacted away). A newer one the state machine refused (a newer build's)
// may be stood in for when the log still reaches.
func (f *fsm) refuseFallback() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.starting && f.fileDamaged {
		return f.restoreErr
	}
	if !f.starting || f.opened == nil || f.firstIndex <= f.opened.Index+1 {
		return nil
	}
	err := fmt.Errorf("snapshot %s (index %d) cannot stand in for a newer one: the log starts at index %d, the entries between are gone",
		f.opened.ID, f.opened.Index, f.firstIndex)
	if f.restoreErr == nil {
		f.restoreErr = err
	}
	return err
}

// started ends the start-only checks of Restore.
func (f *fsm) started() {
	f.mu.Lock()
	f.starting, f.opened = false, nil
	f.mu.Unlock()
}

// snapshotWatch tells the fsm which snapshot raft opens before it hands
// the contents to Restore (raft's Restore gets only the bytes).
type snapshotWatch struct {
	raft.SnapshotStore
	f *fsm
}

func (s snapshotWatch) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	switch {
	case err == nil:
		s.f.opened = meta
	case s.f.starting && s.f.restoreErr == nil:
		// raft only logs this and tries an older snapshot.
		s.f.restoreErr = damaged(s.f.dataDir, snapshotFile(s.f.dataDir, id), err)
		s.f.fileDamaged = true
	}
	return meta, rc, err
}

func (f *fsm) lastRestoreErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restoreErr
}

// fsmSnapshot adapts engine.Snapshot to raft.FSMSnapshot.
type fsmSnapshot struct {
	s       engine.Snapshot
	start   time.Time            // of the capture
	seconds prometheus.Histogram // nil: not timed
}

// Persist writes the snapshot to the sink. On failure the sink is cancelled
// so raft discards the partial file instead of keeping a corrupt snapshot.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.s.Persist(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	if s.seconds != nil {
		s.seconds.Observe(time.Since(s.start).Seconds())
	}
	return nil
}

func (s *fsmSnapshot) Release() { s.s.Release() }
