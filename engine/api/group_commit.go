package api

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/heraldhq/herald/engine"
)

// groupsInFlight is how many groups may be on their way through the log
// at once: Raft stores one while it sends the one before, and a single
// group at a time left it idle in between (fewer submissions a second
// than an entry a write).
const groupsInFlight = 4

// maxGroup is the most writes one grouped entry carries (a task of
// default limits is up to a few KB in the log, a record about 250 bytes).
const maxGroup = 256

// groupCommit puts the commands of writes that arrive together into one
// log entry: every entry is stored, sent and applied on every node, and a
// stream of task submissions, one entry for each task and one for each
// audit record, spent most of the cluster's CPU on entries.
//
// It is group commit without a goroutine or a timer: a writer that finds
// one of the groupsInFlight slots free proposes its write at once, as
// before; those that come while every slot is taken wait, and when a
// group is applied, the first of them proposes every write waiting in
// the next. Each writer proposes at most one group, so no request
// is held beyond its own write and the group before it, and every writer
// returns once its own write is applied (or refused).
type groupCommit[T any] struct {
	// propose replicates a group and returns one outcome per write, in
	// order.
	propose func(ctx context.Context, group []T) []outcome
	mu      sync.Mutex
	pending []*groupWaiter[T]
	busy    int // writers proposing a group now, at most groupsInFlight
}

// outcome is what one write of a group came to: Apply's answer, or the
// error that refused it.
type outcome struct {
	res any
	err error
}

// groupWaiter is one write: turn hands it a group to propose (its own
// write first); done is its outcome.
type groupWaiter[T any] struct {
	item T
	turn chan []*groupWaiter[T]
	done chan outcome
}

// do replicates item with the writes around it.
func (g *groupCommit[T]) do(ctx context.Context, item T) (any, error) {
	w := &groupWaiter[T]{item: item, turn: make(chan []*groupWaiter[T], 1), done: make(chan outcome, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, w)
	var group []*groupWaiter[T]
	if g.busy < groupsInFlight {
		// A slot is left free only with none waiting: the group is w.
		g.busy++
		group = g.take()
	}
	g.mu.Unlock()
	if group == nil {
		select {
		case o := <-w.done:
			return o.res, o.err
		case group = <-w.turn: // a slot passed on, with the writes waiting
		}
	}

	items := make([]T, len(group))
	for i, gw := range group {
		items[i] = gw.item
	}
	for i, o := range g.propose(ctx, items) { // one outcome a write: newGroup's and eachOutcome's
		group[i].done <- o
	}

	g.mu.Lock()
	if len(g.pending) > 0 {
		next := g.take()
		next[0].turn <- next // the slot passes on; each waiter is taken once
	} else {
		g.busy--
	}
	g.mu.Unlock()
	o := <-w.done
	return o.res, o.err
}

// take removes the next group from the front of pending (g.mu held).
func (g *groupCommit[T]) take() []*groupWaiter[T] {
	n := min(len(g.pending), maxGroup)
	group := g.pending[:n:n]
	g.pending = g.pending[n:]
	if len(g.pending) == 0 {
		g.pending = nil // the array held proposed writes
	}
	return group
}

// eachOutcome is a grouped command's outcomes: Apply's answers, one per
// write ([]any, an error value for a refused one), or err for all.
func eachOutcome(n int, res any, err error) []outcome {
	outs := make([]outcome, n)
	answers, _ := res.([]any)
	for i := range outs {
		switch {
		case err != nil:
			outs[i].err = err
		case i >= len(answers):
			outs[i].err = fmt.Errorf("group commit: %d answers for %d writes", len(answers), n)
		default:
			if e, ok := answers[i].(error); ok {
				outs[i].err = e
			} else {
				outs[i].res = answers[i]
			}
		}
	}
	return outs
}

// newAuditGroup groups the audit records of writes answered together
// into one RecordAudits once every member applies FSM version 5.
func newAuditGroup(s *server) *groupCommit[engine.RecordAudit] {
	return newGroup(s, engine.CmdRecordAudit, engine.CmdRecordAudits, func(recs []engine.RecordAudit) any {
		return engine.RecordAudits{Records: recs}
	})
}

// newTaskGroup groups the task submissions that arrive together into one
// SubmitTasks once every member applies FSM version 5.
func newTaskGroup(s *server) *groupCommit[engine.SubmitTask] {
	return newGroup(s, engine.CmdSubmitTask, engine.CmdSubmitTasks, func(tasks []engine.SubmitTask) any {
		return engine.SubmitTasks{Tasks: tasks}
	})
}

// newGroup proposes a group of more than one write as the grouped
// command many (its body made by body), and a write alone, or every write
// while a member applies FSM version 4, as the command one. A write alone
// is proposed under its request's context, as before; a group without
// its proposer's cancellation, since the others' writes are in it, but
// by its deadline (and the node's apply timeout).
func newGroup[T any](s *server, one, many engine.CommandType, body func([]T) any) *groupCommit[T] {
	return &groupCommit[T]{propose: func(ctx context.Context, items []T) []outcome {
		if len(items) > 1 {
			var cancel context.CancelFunc = func() {}
			detached := context.WithoutCancel(ctx)
			if dl, ok := ctx.Deadline(); ok {
				detached, cancel = context.WithDeadline(detached, dl)
			}
			defer cancel()
			ctx = detached
		}
		if len(items) > 1 && s.cfg.FSM != nil && s.cfg.FSM.OldestMemberFSM() >= engine.FSMGroupedWrites {
			res, err := s.apply(ctx, many, body(items))
			if !errors.Is(err, engine.ErrMembersBehind) { // else a member older than the check: one by one
				return eachOutcome(len(items), res, err)
			}
		}
		outs := make([]outcome, len(items))
		for i, it := range items {
			outs[i].res, outs[i].err = s.apply(ctx, one, it)
		}
		return outs
	}}
}
