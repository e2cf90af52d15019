package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrRunExists is StartRun's answer when the slot already fired.
var ErrRunExists = errors.New("run already started for this slot")

// FSM is Herald's replicated state machine. Apply is deterministic: it
// reads no clock, randomness, Lua, network or plugin; every time it needs
// is stamped into the command by the leader. It imports nothing of Raft: the
// cluster package adapts it to raft.FSM.
type FSM struct {
	mu      sync.RWMutex
	st      *state
	applied uint64

	// subs are the subscriptions (Subscribe), each with the topics it
	// waits for: the one way the leader's loops and the node's watchers
	// learn of a change without polling.
	subMu sync.Mutex
	subs  map[chan struct{}]Topic

	halt func(error) // see SetHalt

	stamps stamps // the last command's stamped time (clocks.go)
}

// NewFSM returns an empty state machine.
func NewFSM() *FSM {
	return &FSM{st: newState(), subs: map[chan struct{}]Topic{}}
}

// Topic is a set of kinds of change to the replicated state that a
// subscriber is woken for (Subscribe). Topics combine with |.
type Topic uint8

const (
	// AnyChange is every Apply and every Restore.
	AnyChange Topic = 1 << iota
	// TasksChange is a command that changed the task queue (a task
	// submitted, cancelled or fired, a run fired by hand) and every
	// Restore: the scheduler waits on it, so a task due in a millisecond
	// is fired then, without a polling loop, and it is not woken by the
	// burst's commands.
	TasksChange
)

// Subscribe returns a channel signalled (coalescing, never blocking Apply)
// after every change in one of topics (AnyChange when none are given), and
// a func that ends the subscription. Subscribe before reading the state the
// wait is about, so that a change in between is not missed.
func (f *FSM) Subscribe(topics ...Topic) (<-chan struct{}, func()) {
	var want Topic
	for _, t := range topics {
		want |= t
	}
	if want == 0 {
		want = AnyChange
	}
	ch := make(chan struct{}, 1)
	f.subMu.Lock()
	f.subs[ch] = want
	f.subMu.Unlock()
	return ch, func() {
		f.subMu.Lock()
		delete(f.subs, ch)
		f.subMu.Unlock()
	}
}

// notify wakes the subscriptions to any of topics. It is called after
// f.mu is released, so that a woken loop's read does not wait for it.
func (f *FSM) notify(topics Topic) {
	f.subMu.Lock()
	defer f.subMu.Unlock()
	for ch, want := range f.subs {
		if want&topics != 0 {
			select {
			case ch <- struct{}{}:
			default: // already signalled: the wake-up coalesces
			}
		}
	}
}

// AppliedIndex is the index of the last applied command.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

// SetHalt replaces what Apply does with a command it cannot read, and
// Restore with a snapshot whose body does not read after the node let its
// state go: by default it panics with the *UnreadableCommandError or
// *RestoreError; cmd/herald logs the error and exits instead, so an
// operator sees one clear line, not a stack trace from raft's loops.
func (f *FSM) SetHalt(halt func(error)) { f.halt = halt }

// stop is called, under f.mu, on a command this build cannot apply. It
// does not return.
func (f *FSM) stop(index uint64, t CommandType, v uint8, reason string) {
	e := &UnreadableCommandError{Index: index, Type: t, Version: v, Reason: reason}
	for _, m := range f.st.Members {
		if m.AppliesFSM() > e.Newest || (m.AppliesFSM() == e.Newest && m.ID < e.NewestBuild) {
			e.Newest, e.NewestBuild = m.AppliesFSM(), m.ID
		}
	}
	if m, ok := f.st.Members[e.NewestBuild]; ok && m.Build != "" {
		e.NewestBuild = m.ID + ", build " + m.Build
	}
	f.haltWith(e)
}

// haltWith stops the node through its halt func (SetHalt; a panic when
// none is set). It does not return.
func (f *FSM) haltWith(err error) {
	halt := f.halt
	if halt == nil {
		halt = func(err error) { panic(err) }
	}
	halt(err)
	panic(err) // a halt func that returns must not let the node go on
}

// Apply applies one command. A command this build cannot read (an unknown
// type without the ignorable flag, an unknown body version, a body that
// does not decode) stops the node through its halt func: a node must stop
// loudly rather than diverge from its peers silently.
func (f *FSM) Apply(index, term uint64, cmd []byte) any {
	f.mu.Lock()
	tasks := false
	var stamped time.Time
	defer func() {
		f.applied = index
		if !stamped.IsZero() {
			f.stamps.last.Store(&Stamp{Index: index, At: stamped})
		}
		f.mu.Unlock()
		topics := AnyChange
		if tasks {
			topics |= TasksChange
		}
		f.notify(topics)
	}()
	if len(cmd) < 2 {
		f.stop(index, 0, 0, fmt.Sprintf("a command of %d bytes is too short", len(cmd)))
	}
	t, v, body := CommandType(cmd[0]), cmd[1], cmd[2:]
	spec, known := commandSpecs[t&^CmdIgnorable]
	switch {
	case !known && t&CmdIgnorable != 0:
		return nil // a newer build's informational command: skip it
	case !known:
		f.stop(index, t, v, "the command type is unknown to this build (written by a newer one)")
	case v < 1 || v > spec.latest():
		if t&CmdIgnorable != 0 {
			return nil
		}
		f.stop(index, t, v, fmt.Sprintf("this build reads body versions 1 to %d", spec.latest()))
	}
	a := applier{st: f.st, term: term, tasks: &tasks, stamped: &stamped, fresh: dayBatch{},
		stop: func(reason string) { f.stop(index, t, v, reason) }}
	d := decoder{f: f, index: index, t: t, v: v, body: body}
	if spec.apply == nil {
		// In the table without an applier: a build error, caught by
		// TestEveryCommandIsDispatched and TestCommandTable.
		f.stop(index, t, v, "the command is in the table but this build does not dispatch it")
	}
	return spec.apply(a, d)
}

// decoder carries what a body's decoding needs to stop the node clearly.
type decoder struct {
	f     *FSM
	index uint64
	t     CommandType
	v     uint8
	body  []byte
}

func decode[T any](d decoder) T {
	v, err := decodeBody[T](d.v, d.body)
	if err != nil {
		d.f.stop(d.index, d.t, d.v, "the body does not decode: "+err.Error())
	}
	return v
}

// unpack decodes a packed body (packed.go), stopping the node if it does
// not decode.
func unpack[T any](d decoder, f func([]byte) (T, error)) T {
	v, err := f(d.body)
	if err != nil {
		d.f.stop(d.index, d.t, d.v, "the body does not decode: "+err.Error())
	}
	return v
}
