package engine

import (
	"errors"
	"fmt"
	"sync"
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
	changed chan struct{}
	tasks   chan struct{}

	subMu sync.Mutex
	subs  map[chan struct{}]struct{}

	halt func(error) // see SetHalt
}

// NewFSM returns an empty state machine.
func NewFSM() *FSM {
	return &FSM{st: newState(), changed: make(chan struct{}, 1), tasks: make(chan struct{}, 1), subs: map[chan struct{}]struct{}{}}
}

// TasksChanged is signalled (coalescing) when a task is submitted or
// cancelled, and after a Restore: the scheduler waits on it, so a task due
// in a millisecond is fired then, without a polling loop.
func (f *FSM) TasksChanged() <-chan struct{} { return f.tasks }

// Subscribe returns a channel signalled (coalescing) after every Apply and
// Restore, for loops other than the executor's, and a func that ends the
// subscription.
func (f *FSM) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.subMu.Lock()
	f.subs[ch] = struct{}{}
	f.subMu.Unlock()
	return ch, func() {
		f.subMu.Lock()
		delete(f.subs, ch)
		f.subMu.Unlock()
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Changed is signalled (coalescing, never blocking Apply) after every
// Apply and Restore, so the leader's loops wake up instead of polling.
func (f *FSM) Changed() <-chan struct{} { return f.changed }

func (f *FSM) notify() {
	signal(f.changed)
	f.subMu.Lock()
	for ch := range f.subs {
		signal(ch)
	}
	f.subMu.Unlock()
}

// AppliedIndex is the index of the last applied command.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

// SetHalt replaces what Apply does with a command it cannot read: by
// default it panics with the *UnreadableCommandError; cmd/herald logs the
// error and exits instead, so an operator sees one clear line, not a
// stack trace from raft's apply loop.
func (f *FSM) SetHalt(halt func(error)) { f.halt = halt }

// stop is called, with f.mu held, on a command this build cannot apply. It
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
	halt := f.halt
	if halt == nil {
		halt = func(err error) { panic(err) }
	}
	halt(e)
	panic(e) // a halt func that returns must not let the node go on
}

// Apply applies one command. A command this build cannot read (an unknown
// type without the ignorable flag, an unknown body version, a body that
// does not decode) stops the node through its halt func: a node must stop
// loudly rather than diverge from its peers silently.
func (f *FSM) Apply(index, term uint64, cmd []byte) any {
	f.mu.Lock()
	tasks := false
	defer func() {
		f.applied = index
		f.mu.Unlock()
		f.notify()
		if tasks {
			signal(f.tasks)
		}
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
	a := applier{st: f.st, term: term, tasks: &tasks, fresh: dayBatch{},
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
