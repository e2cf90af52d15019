package engine

import (
	"encoding/json"
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
	mu sync.RWMutex
	// snapMu serialises Snapshot: cloning a b-tree writes the original's
	// copy-on-write context, which a read lock alone does not protect.
	snapMu  sync.Mutex
	st      *state
	applied uint64
	changed chan struct{}
	tasks   chan struct{}

	subMu sync.Mutex
	subs  map[chan struct{}]struct{}
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

// Apply applies one command. An unknown command type or version, or a body
// that does not decode, panics: a node must stop loudly rather than diverge
// from its peers silently.
func (f *FSM) Apply(index, term uint64, cmd []byte) any {
	if len(cmd) < 2 {
		panic(fmt.Sprintf("herald: log entry %d: command of %d bytes is too short", index, len(cmd)))
	}
	t, v, body := CommandType(cmd[0]), cmd[1], cmd[2:]
	if v != CommandVersion {
		panic(fmt.Sprintf("herald: log entry %d: %s has version %d; this binary knows %d — upgrade this node", index, t, v, CommandVersion))
	}
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
	a := applier{st: f.st, term: term, tasks: &tasks}
	switch t {
	case CmdStartRun:
		return a.startRun(decode[StartRun](index, t, body))
	case CmdAddDeliveries:
		return a.addDeliveries(decode[AddDeliveries](index, t, body))
	case CmdFinishPlan:
		return a.finishPlan(decode[FinishPlan](index, t, body))
	case CmdClaim:
		return a.claim(decode[ClaimDeliveries](index, t, body))
	case CmdRecordResults:
		return a.recordResults(decode[RecordResults](index, t, body))
	case CmdExpire:
		return a.expire(decode[Expire](index, t, body))
	case CmdUpsertMember:
		m := decode[Member](index, t, body)
		f.st.Members[m.ID] = m
		return nil
	case CmdRemoveMember:
		delete(f.st.Members, decode[RemoveMember](index, t, body).ID)
		return nil
	case CmdInitCursor:
		return a.initCursor(decode[InitCursor](index, t, body))
	case CmdRaiseAlert:
		c := decode[RaiseAlert](index, t, body)
		f.st.raise(c.Cause, c.Rule, c.Message, c.Now)
		return nil
	case CmdAckAlert:
		return a.ackAlert(decode[AckAlert](index, t, body))
	case CmdSubmitTask:
		return a.submitTask(decode[SubmitTask](index, t, body))
	case CmdCancelTask:
		return a.cancelTask(decode[CancelTask](index, t, body))
	case CmdNotifyAlert:
		return a.notifyAlert(decode[NotifyAlert](index, t, body))
	case CmdCompensated:
		return a.compensated(decode[Compensated](index, t, body))
	case CmdPrune:
		return a.prune(decode[Prune](index, t, body))
	case CmdSetDirectory:
		return a.setDirectory(decode[SetDirectory](index, t, body))
	case CmdHoldDirectory:
		return a.holdDirectory(decode[HoldDirectory](index, t, body))
	case CmdConfirmDirectory:
		return a.confirmDirectory(decode[ConfirmDirectory](index, t, body))
	}
	panic(fmt.Sprintf("herald: log entry %d: unknown command type %d — this binary is older than the cluster; upgrade this node", index, uint8(t)))
}

func decode[T any](index uint64, t CommandType, body []byte) T {
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		panic(fmt.Sprintf("herald: log entry %d: cannot decode %s: %v", index, t, err))
	}
	return v
}
