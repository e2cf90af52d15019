package leader

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/engine"
)

// The clock watch compares this node's wall clock with the members' (their
// reports, through ClockView) and keeps a verdict the other loops read. A
// leader stamps its clock into every command, so while its clock differs
// from the majority's (the median of the members' clocks, its own
// included) by more than MaxClockSkew, or while it does not yet know the
// clocks of a majority:
//
//   - the scheduler fires no slot and no task, the housekeeper prunes
//     nothing and the executor expires nothing;
//   - every time it stamps is the majority's (its clock plus the median
//     offset), so what it still does, sending the deliveries already
//     replicated, happens by a good clock: nothing is sent early;
//   - it hands leadership to a member whose clock agrees, if there is one.
//
// Whoever leads raises the clock-skew alert while any member's clock is
// off, naming the nodes and their offsets, and resolves it when none is.
// The leader also writes the clocks into the log (ObserveClocks), so that
// the state machine itself refuses a horizon that runs ahead of them.

// Defaults of ClockConfig.
const (
	// MaxClockSkewDefault is max_clock_skew's default (see
	// engine.MaxClockSkewDefault for why).
	MaxClockSkewDefault = engine.MaxClockSkewDefault
	// ClockCheckEveryDefault is how often the watch looks at the reports
	// (the cluster refreshes them every few seconds).
	ClockCheckEveryDefault = time.Second
	// ObserveEveryDefault is how often the leader writes the clocks into
	// the log; an observation is taken for twice as long.
	ObserveEveryDefault = time.Minute
	// transferEvery spaces the attempts to hand leadership over.
	transferEvery = 10 * time.Second
	// unverifiedEvery is how soon the watch looks again while a majority's
	// clocks are not known: at the start of a term the first reports come
	// within a round trip, and until then nothing fires.
	unverifiedEvery = 100 * time.Millisecond
)

// MemberClock is one member's wall clock as this node measured it.
type MemberClock struct {
	ID string
	// Offset is the member's clock minus this node's.
	Offset time.Duration
}

// ClockView is what the leader knows of the members' clocks (cluster's
// member reports).
type ClockView interface {
	// MemberClocks returns the clocks known, this node's own included
	// (offset 0), and how many members can report one (a member whose
	// build has no reports cannot, and does not count).
	MemberClocks() (clocks []MemberClock, members int)
}

// ClockConfig configures the clock watch.
type ClockConfig struct {
	// Clocks reports the members' clocks; nil takes this node's clock as
	// it is (one process, tests of other things).
	Clocks ClockView
	// MaxClockSkew (max_clock_skew): how far a clock may be from the
	// majority's; default MaxClockSkewDefault.
	MaxClockSkew time.Duration
	// Transfer hands leadership to the member id (raft's
	// LeadershipTransferToServer); nil never does.
	Transfer func(ctx context.Context, id string) error
	// ClockCheckEvery and ObserveEvery: defaults ClockCheckEveryDefault
	// and ObserveEveryDefault.
	ClockCheckEvery time.Duration
	ObserveEvery    time.Duration
}

func (c *ClockConfig) setDefaults() {
	setDefault(&c.MaxClockSkew, MaxClockSkewDefault)
	setDefault(&c.ClockCheckEvery, ClockCheckEveryDefault)
	setDefault(&c.ObserveEvery, ObserveEveryDefault)
}

// clockVerdict is the watch's last look at the clocks.
type clockVerdict struct {
	// suspended: this node's clock is off, or not verified yet; the loops
	// fire, prune and expire nothing. why says which.
	suspended bool
	why       string
	// correction is added to this node's clock to read the majority's
	// (the median offset, when this node's clock is off; else 0).
	correction time.Duration
	known      []MemberClock // the clocks known, offsets from this node's
	// off are the members whose clock is more than the skew from the
	// median, with their offset from it; agree the others but this node,
	// closest first.
	off   []MemberClock
	agree []string
}

// clockWatch keeps the verdict and acts on it.
type clockWatch struct {
	l       *Leader
	verdict atomic.Pointer[clockVerdict]

	// Used by the watch's goroutine only.
	observed   time.Time // this node's clock at the last observation
	raised     string    // the off nodes the alert was raised for this term
	transferAt time.Time
}

func newClockWatch(l *Leader) *clockWatch {
	w := &clockWatch{l: l}
	w.verdict.Store(&clockVerdict{})
	return w
}

func (w *clockWatch) current() *clockVerdict { return w.verdict.Load() }

func (w *clockWatch) run(ctx context.Context) {
	for {
		next := w.runOnce(ctx)
		if !wait(ctx, next, w.l.now()) {
			return
		}
	}
}

// runOnce looks at the clocks, acts, and returns when to look again (by
// Leader.now, as the other loops' wake-ups).
func (w *clockWatch) runOnce(ctx context.Context) time.Time {
	raw := w.l.cfg.NowFunc()
	if w.l.cfg.Clocks == nil {
		return raw.Add(time.Hour)
	}
	was := w.current()
	v := w.judge()
	w.verdict.Store(v)
	if v.suspended != was.suspended || v.why != was.why {
		if v.suspended {
			w.l.log.Warn("leader suspends firing, pruning and expiry: its clock is not trusted", "why", v.why)
		} else {
			w.l.log.Info("leader's clock agrees with the majority's again: firing, pruning and expiry resume")
		}
	}
	w.alert(ctx, v)
	w.observe(ctx, v, raw)
	w.handOver(ctx, v, raw)
	return w.l.now().Add(w.recheck())
}

// recheck is how soon the verdict may change: sooner while it waits for
// a majority's clocks.
func (w *clockWatch) recheck() time.Duration {
	if v := w.current(); v.suspended && v.correction == 0 {
		return min(w.l.cfg.ClockCheckEvery, unverifiedEvery)
	}
	return w.l.cfg.ClockCheckEvery
}

// judge computes the verdict from the members' clocks.
func (w *clockWatch) judge() *clockVerdict {
	clocks, members := w.l.cfg.Clocks.MemberClocks()
	self := w.l.cfg.NodeID
	if !slices.ContainsFunc(clocks, func(c MemberClock) bool { return c.ID == self }) {
		clocks = append(clocks, MemberClock{ID: self})
	}
	slices.SortFunc(clocks, func(a, b MemberClock) int { return strings.Compare(a.ID, b.ID) })
	v := &clockVerdict{known: clocks}
	if members > 1 && len(clocks) <= members/2 {
		v.suspended = true
		v.why = fmt.Sprintf("the clocks of %d of the %d members are known, not a majority's", len(clocks), members)
		return v
	}
	offsets := make([]time.Duration, len(clocks))
	for i, c := range clocks {
		offsets[i] = c.Offset
	}
	median := medianDuration(offsets)
	skew := w.l.cfg.MaxClockSkew
	for _, c := range clocks {
		d := c.Offset - median
		switch {
		case d > skew || d < -skew:
			v.off = append(v.off, MemberClock{ID: c.ID, Offset: d})
		case c.ID != self:
			v.agree = append(v.agree, c.ID)
		}
	}
	slices.SortStableFunc(v.agree, func(a, b string) int {
		return cmp.Compare(abs(offsetOf(clocks, a)-median), abs(offsetOf(clocks, b)-median))
	})
	if median > skew || median < -skew {
		v.suspended = true
		v.correction = median
		v.why = fmt.Sprintf("this node's clock is %s from the majority's (max clock skew %s)", signed(-median), skew)
	}
	return v
}

// alert raises the clock-skew alert for the members whose clock is off,
// once per set of them this term, and resolves it when none is.
func (w *clockWatch) alert(ctx context.Context, v *clockVerdict) {
	l := w.l
	cause := engine.AlertCause{Kind: engine.AlertClockSkew}
	if len(v.off) == 0 {
		if v.suspended {
			return // not known yet: neither raise nor resolve
		}
		w.raised = ""
		if al, ok := l.cfg.FSM.Alert(engine.AlertID(cause.Key())); ok && !al.Acked {
			l.raise(ctx, engine.NewRaiseAlert(cause, "", engine.AlertParams{},
				"resolved: every member's clock agrees with the majority's again (within max clock skew "+l.cfg.MaxClockSkew.String()+")", l.now()))
			if _, err := l.propose(ctx, engine.CmdAckAlert, engine.AckAlert{ID: al.ID}); err != nil {
				l.log.Warn("cannot resolve the clock-skew alert", "err", err)
			}
		}
		return
	}
	var ids, parts []string
	for _, c := range v.off {
		ids = append(ids, c.ID)
		parts = append(parts, c.ID+" "+signed(c.Offset))
	}
	key := strings.Join(ids, ",")
	if key == w.raised {
		return
	}
	msg := fmt.Sprintf("the clocks of %s differ from the majority's by more than max_clock_skew %s: %s",
		strings.Join(ids, ", "), l.cfg.MaxClockSkew, strings.Join(parts, ", "))
	if v.suspended {
		msg += fmt.Sprintf("; the leader %s fires no slot and prunes and expires nothing until its clock agrees", l.cfg.NodeID)
		if len(v.agree) > 0 {
			msg += " and hands leadership to " + v.agree[0]
		}
	}
	msg += "; check the node's time synchronisation (NTP)"
	l.log.Error("clock skew", "nodes", ids, "offsets", strings.Join(parts, ", "))
	if _, err := l.propose(ctx, engine.CmdRaiseAlert, engine.NewRaiseAlert(cause, "",
		engine.AlertParams{Nodes: ids, Error: strings.Join(parts, ", ")}, msg, l.now())); err != nil {
		l.log.Error("cannot raise alert", "cause", cause.Key(), "message", msg, "err", err)
		return
	}
	w.raised = key
}

// observe writes the clocks into the log every ObserveEvery, once every
// member reads ObserveClocks and a majority's clocks are known. A leader
// whose own clock is off observes too: the log then holds the majority's
// time, and the state machine refuses its horizons as well.
func (w *clockWatch) observe(ctx context.Context, v *clockVerdict, raw time.Time) {
	l := w.l
	if since := raw.Sub(w.observed); !w.observed.IsZero() && since >= 0 && since < l.cfg.ObserveEvery {
		return
	}
	if l.cfg.FSM.OldestMemberFSM() < engine.FSMClocks || (v.suspended && v.correction == 0) {
		return // a member would stop on it; or a majority's clocks are not known
	}
	clocks := make(map[string]time.Time, len(v.known))
	for _, c := range v.known {
		clocks[c.ID] = raw.Add(c.Offset)
	}
	_, err := l.propose(ctx, engine.CmdObserveClocks, engine.ObserveClocks{Now: raw, Clocks: clocks,
		MaxSkew: l.cfg.MaxClockSkew, Within: 2 * l.cfg.ObserveEvery})
	if err != nil {
		l.log.Warn("cannot record the members' clocks", "err", err)
		return
	}
	w.observed = raw
}

// handOver asks for leadership to go to the member whose clock is closest
// to the majority's, while this node's own is off.
func (w *clockWatch) handOver(ctx context.Context, v *clockVerdict, raw time.Time) {
	l := w.l
	if !v.suspended || v.correction == 0 || len(v.agree) == 0 || l.cfg.Transfer == nil {
		return
	}
	if since := raw.Sub(w.transferAt); !w.transferAt.IsZero() && since >= 0 && since < transferEvery {
		return
	}
	w.transferAt = raw
	to := v.agree[0]
	l.log.Warn("handing leadership to a member whose clock agrees with the majority's", "to", to)
	if err := l.cfg.Transfer(ctx, to); err != nil {
		l.log.Warn("cannot hand leadership over", "to", to, "err", err)
	}
}

// medianDuration is the median of ds, the mean of the middle two for an
// even number (as the state machine's median of ObserveClocks).
func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return s[mid-1] + (s[mid]-s[mid-1])/2
}

func offsetOf(clocks []MemberClock, id string) time.Duration {
	for _, c := range clocks {
		if c.ID == id {
			return c.Offset
		}
	}
	return 0
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// signed writes an offset with its sign and whether it is ahead or
// behind, to the second (to the millisecond below a second).
func signed(d time.Duration) string {
	r := d.Round(time.Second)
	if abs(d) < time.Second {
		r = d.Round(time.Millisecond)
	}
	switch {
	case d > 0:
		return "+" + r.String() + " (ahead)"
	case d < 0:
		return r.String() + " (behind)"
	}
	return "0s"
}
