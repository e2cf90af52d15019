// Package impure is the failing example for engine's purity check: a state
// machine whose Apply reads the clock through a helper, and which starts a
// goroutine.
package impure

import "time"

// FSM is a state machine that breaks the rule.
type FSM struct{ last time.Time }

// Apply reads the clock through a helper: caught with the path.
func (f *FSM) Apply(cmd []byte) { f.last = stamp() }

func stamp() time.Time { return time.Now() }

// Spawn starts a goroutine.
func (f *FSM) Spawn() { go func() {}() }
