// Package enginetest holds what tests of packages built on the engine
// share: a one-node replicated log, a hand-moved clock, fixed rules and a
// recording sender.
package enginetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/heraldhq/herald/engine"
)

// Replicator is a one-node log: it applies each command to FSM at once, as
// the leader of term 1 would, so a test can drive the API, the CLI or the
// rules' compensation without Raft.
type Replicator struct {
	FSM *engine.FSM

	mu      sync.Mutex
	index   uint64
	refuse  atomic.Int32
	refused atomic.Int32
}

// New returns a Replicator over a fresh state machine.
func New() *Replicator { return &Replicator{FSM: engine.NewFSM()} }

// RefuseNext makes the next n Applies fail with engine.ErrNotLeader, as on
// a cluster that is electing.
func (r *Replicator) RefuseNext(n int) { r.refuse.Store(int32(n)) }

// Refused is how many Applies were refused so far.
func (r *Replicator) Refused() int { return int(r.refused.Load()) }

// Apply applies cmd, unless it is to be refused.
func (r *Replicator) Apply(_ context.Context, cmd []byte) (any, error) {
	for n := r.refuse.Load(); n > 0; n = r.refuse.Load() {
		if r.refuse.CompareAndSwap(n, n-1) {
			r.refused.Add(1)
			return nil, engine.ErrNotLeader
		}
	}
	cmd, err := r.FSM.Admit(cmd) // as the cluster's leader does
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.index++
	return r.FSM.Apply(r.index, 1, cmd), nil
}

// VerifyLeader always confirms: a one-node log is its own quorum.
func (r *Replicator) VerifyLeader(context.Context) error { return nil }

// MustApply encodes and applies one command and returns what the state
// machine answered; it fails the test if the command cannot be applied.
func (r *Replicator) MustApply(t testing.TB, ct engine.CommandType, body any) any {
	t.Helper()
	cmd, err := engine.Encode(ct, body)
	if err != nil {
		t.Fatalf("encode %s: %v", ct, err)
	}
	res, err := r.Apply(context.Background(), cmd)
	if err != nil {
		t.Fatalf("apply %s: %v", ct, err)
	}
	return res
}

var _ engine.Replicator = (*Replicator)(nil)
