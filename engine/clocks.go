package engine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"
)

// This file holds what the log knows of the cluster's wall clocks: the
// leader's periodic ObserveClocks, the majority's time it leaves in the
// state, and the guard that refuses a prune or expiry horizon that runs
// ahead of it. A leader stamps its own clock into every command, so a
// leader whose clock jumped ahead would otherwise delete history (Prune),
// end pending deliveries (Expire) and empty the ledger, on every node.

// MaxClockSkewDefault is max_clock_skew's default: how far a member's
// clock may be from the majority's. Clocks under NTP agree within
// milliseconds (ntpd steps a clock beyond 128 ms), the leader measures
// the offsets within half a report's round trip, and a follower reads a
// stamp within a second of its commit: 10 s is far above all three, so a
// healthy cluster never trips it, and small beside what a skew does (a
// slot fired up to 10 s early, a horizon off by as much).
const MaxClockSkewDefault = 10 * time.Second

// ObserveClocks records the members' wall clocks as the leader measured
// them (each member's report, carried to the leader's Now), and the skew
// in force. The state keeps their median, the majority's time: a Prune,
// PruneAudit or Expire stamped more than MaxSkew+Within past it is
// refused. Since FSM version 3.
type ObserveClocks struct {
	// Now is the leader's own clock.
	Now time.Time `json:"now"`
	// Clocks holds each member's clock at Now, by member id, the leader's
	// own included (equal to Now).
	Clocks map[string]time.Time `json:"clocks"`
	// MaxSkew is the max_clock_skew of the leader's configuration.
	MaxSkew time.Duration `json:"max_skew"`
	// Within is how soon the leader observes again: the age the guard
	// allows an observation, the only measure of its age the log has.
	Within time.Duration `json:"within"`
}

// ClockSeen is the last ObserveClocks the log applied, with the median of
// its clocks.
type ClockSeen struct {
	Median  time.Time
	Leader  time.Time // the observing leader's own clock
	MaxSkew time.Duration
	Within  time.Duration
	Clocks  map[string]time.Time
}

// Limit is the latest horizon the state machine takes while c is the last
// observation: the majority's time plus the skew and the observation's
// allowed age.
func (c *ClockSeen) Limit() time.Time { return c.Median.Add(c.MaxSkew + c.Within) }

// ErrHorizonAhead is the answer to a Prune, PruneAudit or Expire whose
// time runs ahead of the cluster's clock as the log last saw it. Matched
// by *HorizonAheadError.
var ErrHorizonAhead = errors.New("horizon ahead of the cluster's clock")

// HorizonAheadError says which command was refused and by how much.
type HorizonAheadError struct {
	Command CommandType
	At      time.Time // the command's latest time
	Seen    ClockSeen
}

func (e *HorizonAheadError) Error() string {
	return fmt.Sprintf("%s refused: its time %s runs %s ahead of the cluster's clock as the log last saw it (median of the members' clocks %s; max clock skew %s, observations within %s); the leader's clock is wrong, or it has not observed the members' clocks lately",
		e.Command, e.At.UTC().Format(time.RFC3339), e.At.Sub(e.Seen.Median).Round(time.Second),
		e.Seen.Median.UTC().Format(time.RFC3339), e.Seen.MaxSkew, e.Seen.Within)
}

// Is makes errors.Is(err, ErrHorizonAhead) true.
func (e *HorizonAheadError) Is(target error) bool { return target == ErrHorizonAhead }

// medianTime is the median of ts (the mean of the middle two when their
// number is even, so that two clocks that disagree give a time neither
// can be trusted to be within skew of).
func medianTime(ts []time.Time) time.Time {
	s := slices.SortedFunc(slices.Values(ts), func(a, b time.Time) int { return a.Compare(b) })
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return s[mid-1].Add(s[mid].Sub(s[mid-1]) / 2)
}

// observeClocks applies CmdObserveClocks. It refuses an observation that
// holds the clocks of no majority of the recorded members: a leader alone
// could otherwise vouch for its own clock.
func (a applier) observeClocks(c ObserveClocks) any {
	if c.MaxSkew <= 0 || c.Within <= 0 {
		return errors.New("observe clocks: max skew and within must be positive")
	}
	var ts []time.Time
	for _, id := range slices.Sorted(maps.Keys(c.Clocks)) {
		if _, ok := a.st.Members[id]; ok || len(a.st.Members) == 0 {
			ts = append(ts, c.Clocks[id])
		}
	}
	if len(ts) == 0 || len(ts) <= len(a.st.Members)/2 {
		return fmt.Errorf("observe clocks: clocks of %d of the %d members, not a majority", len(ts), len(a.st.Members))
	}
	// Not a Stamp: c.Now is the leader's own clock, which the leader
	// does not act by while it is off (see engine/leader's clock.go).
	a.st.Clock = &ClockSeen{Median: medianTime(ts), Leader: c.Now, MaxSkew: c.MaxSkew, Within: c.Within, Clocks: maps.Clone(c.Clocks)}
	return nil
}

// horizonAhead is the guard of the commands that end or delete state by
// the time the leader stamped: nil when no observation was ever applied
// (logs from before FSM version 3 replay as they did) or every one of ts
// is within the limit.
func (a applier) horizonAhead(t CommandType, ts ...time.Time) error {
	seen := a.st.Clock
	if seen == nil {
		return nil
	}
	latest := slices.MaxFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	if latest.After(seen.Limit()) {
		return &HorizonAheadError{Command: t, At: latest, Seen: *seen}
	}
	return nil
}

// Stamp is the time the leader acts by, as stamped into the last command
// applied that carries one (StartRun, Claim, RecordResults, Expire,
// Prune), with the command's log index: what a follower compares
// with its own clock (outside Apply) to say that the leader's is off.
type Stamp struct {
	Index uint64
	At    time.Time
}

// stamps holds an FSM's last Stamp.
type stamps struct{ last atomic.Pointer[Stamp] }

// LastStamp is the last applied command's stamped time, ok false before
// any.
func (f *FSM) LastStamp() (Stamp, bool) {
	s := f.stamps.last.Load()
	if s == nil {
		return Stamp{}, false
	}
	return *s, true
}

// stamp records the time the leader stamped into the command being
// applied (see Stamp).
func (a applier) stamp(at time.Time) {
	if a.stamped != nil && !at.IsZero() {
		*a.stamped = at
	}
}

// ClockSeen is the last clock observation the log applied, ok false while
// there is none.
func (f *FSM) ClockSeen() (ClockSeen, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.st.Clock == nil {
		return ClockSeen{}, false
	}
	return *f.st.Clock, true
}
