package api

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/heraldhq/herald/engine"
)

// maxAuditBatch is the most records one RecordAudits carries (about
// 250 bytes each in the log).
const maxAuditBatch = 256

// auditBatch puts the records of writes answered together into one
// RecordAudits. A record of its own per write was half the entries of a
// stream of task submissions, and every entry is stored, sent and applied
// on every node: with one record an entry, `herald bench tasks` through a
// follower took 1,500 submissions a second, 2,700 without records at all.
//
// It is group commit without a goroutine or a timer: the first writer to
// find nobody proposing proposes every record waiting, including its own;
// those that come while it does wait, and the first of them proposes the
// next batch once that one is applied. Each writer proposes at most one
// batch, so no request is held beyond its own record and the one before,
// and every writer returns once its record is applied (or refused), as
// when records went one by one.
type auditBatch struct {
	s       *server
	mu      sync.Mutex
	pending []*auditWaiter
	busy    bool // a writer is proposing a batch
}

// auditWaiter is one write's record: turn says it is this writer's turn
// to propose; done is the record's outcome.
type auditWaiter struct {
	rec  engine.RecordAudit
	turn chan struct{}
	done chan error
}

// record replicates rec with the records of the writes around it, and
// says whether it was.
func (b *auditBatch) record(ctx context.Context, rec engine.RecordAudit) error {
	w := &auditWaiter{rec: rec, turn: make(chan struct{}, 1), done: make(chan error, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, w)
	lead := !b.busy // then w is pending[0]: a writer ends busy only with none waiting
	b.busy = true
	b.mu.Unlock()
	if !lead {
		select {
		case err := <-w.done:
			return err
		case <-w.turn: // at the front of the next batch
		}
	}
	b.mu.Lock()
	n := min(len(b.pending), maxAuditBatch)
	batch := b.pending[:n:n]
	b.pending = b.pending[n:]
	b.mu.Unlock()

	b.propose(ctx, batch)

	b.mu.Lock()
	if len(b.pending) > 0 {
		b.pending[0].turn <- struct{}{}
	} else {
		b.busy = false
		b.pending = nil // the array held proposed records
	}
	b.mu.Unlock()
	return <-w.done
}

// propose replicates batch: in one RecordAudits once every member applies
// it, else one RecordAudit a record. Every waiter gets its outcome.
func (b *auditBatch) propose(ctx context.Context, batch []*auditWaiter) {
	fsm := b.s.cfg.FSM
	if len(batch) > 1 && fsm != nil && fsm.OldestMemberFSM() >= engine.FSMAuditBatches {
		recs := make([]engine.RecordAudit, len(batch))
		for i, w := range batch {
			recs[i] = w.rec
		}
		res, err := b.s.apply(ctx, engine.CmdRecordAudits, engine.RecordAudits{Records: recs})
		if !errors.Is(err, engine.ErrMembersBehind) { // a member older than the check: one by one
			outs, _ := res.([]any)
			for i, w := range batch {
				switch {
				case err != nil:
					w.done <- err
				case i >= len(outs):
					w.done <- fmt.Errorf("record audits: %d outcomes for %d records", len(outs), len(batch))
				default:
					e, _ := outs[i].(error)
					w.done <- e
				}
			}
			return
		}
	}
	for _, w := range batch {
		_, err := b.s.apply(ctx, engine.CmdRecordAudit, w.rec)
		w.done <- err
	}
}
