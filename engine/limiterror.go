package engine

// LimitError is a RuleSource's answer when a rule's planning was stopped
// at one of the node's limits (its time or its memory) rather than by a
// mistake in the rule: the run is too big for the limit. The planner
// fails the run with the limit and the remedy named, so the alert says
// what to change (a failed run is never planned again: nothing is sent).
type LimitError struct {
	Limit   string // which: "rule time limit", "rule memory limit"
	Value   string // as the user writes it: "2s", "128MiB"
	Setting string // the node setting that raises it, "" when none does
	Err     error  // the stopped call's own error (file:line, what stopped)
}

func (e *LimitError) Error() string {
	msg := "stopped at the " + e.Limit + " of " + e.Value
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}

// Unwrap gives the stopped call's error (the rules' ErrTimeout, ErrMemory).
func (e *LimitError) Unwrap() error { return e.Err }

// Remedy is what an operator can do about it.
func (e *LimitError) Remedy() string {
	if e.Setting == "" {
		return "make the rule cheaper (fewer people per run, less work per message)"
	}
	return "raise " + e.Setting + " or make the rule cheaper (fewer people per run, less work per message)"
}
