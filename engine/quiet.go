package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// QuietHours is a daily window of a person's local time in which messages
// of normal and low priority wait: from From until To, both offsets from
// local midnight. From after To wraps past midnight (22:00–08:00). The
// zero value is no window.
type QuietHours struct {
	From time.Duration
	To   time.Duration
}

// ParseQuietHours reads a window from "HH:MM" to "HH:MM". The two must
// differ: a window of no length, or of the whole day, is a mistake.
func ParseQuietHours(from, to string) (QuietHours, error) {
	f, err := parseClock(from)
	if err != nil {
		return QuietHours{}, fmt.Errorf("quiet hours from %q: %w", from, err)
	}
	t, err := parseClock(to)
	if err != nil {
		return QuietHours{}, fmt.Errorf("quiet hours to %q: %w", to, err)
	}
	if f == t {
		return QuietHours{}, fmt.Errorf("quiet hours from %s to %s: from and to must differ", from, to)
	}
	return QuietHours{From: f, To: t}, nil
}

// ParseQuietRange reads "22:00-08:00" (a people file column); "off" or
// "none" is an explicit no window (the zero value, no error).
func ParseQuietRange(s string) (QuietHours, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "off", "none":
		return QuietHours{}, nil
	}
	from, to, ok := strings.Cut(strings.ReplaceAll(s, "–", "-"), "-")
	if !ok {
		return QuietHours{}, fmt.Errorf("quiet hours %q: want HH:MM-HH:MM (like 22:00-08:00) or off", s)
	}
	return ParseQuietHours(strings.TrimSpace(from), strings.TrimSpace(to))
}

func parseClock(s string) (time.Duration, error) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, fmt.Errorf("want a time of day like 22:00")
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

// IsZero reports whether q is no window.
func (q QuietHours) IsZero() bool { return q.From == q.To }

// String is "22:00–08:00", or "" for no window.
func (q QuietHours) String() string {
	if q.IsZero() {
		return ""
	}
	return clock(q.From) + "–" + clock(q.To)
}

func clock(d time.Duration) string {
	return fmt.Sprintf("%02d:%02d", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// Release returns when a message due at t may go in zone loc: t itself
// when t is outside the window, else the window's end. The window's edges
// are wall-clock times of the day, so a DST change inside it moves the
// end with the clocks (08:00 is 08:00 local on either side).
func (q QuietHours) Release(t time.Time, loc *time.Location) (time.Time, bool) {
	if q.IsZero() {
		return t, false
	}
	lt := t.In(loc)
	y, m, d := lt.Date()
	// The wall clock of t, not t - midnight: a DST change between them
	// would shift it by an hour.
	tod := time.Duration(lt.Hour())*time.Hour + time.Duration(lt.Minute())*time.Minute +
		time.Duration(lt.Second())*time.Second + time.Duration(lt.Nanosecond())
	end := func(days int) time.Time {
		return time.Date(y, m, d+days, int(q.To/time.Hour), int(q.To%time.Hour/time.Minute), 0, 0, loc)
	}
	if q.From < q.To { // within one day: 12:00–14:00
		if tod >= q.From && tod < q.To {
			return end(0), true
		}
		return t, false
	}
	switch { // wraps past midnight: 22:00–08:00
	case tod >= q.From:
		return end(1), true
	case tod < q.To:
		return end(0), true
	}
	return t, false
}

// DigestRelease is when a delivery planned for t in a rule with digest
// window w goes out: at the end of its window, the windows aligned to
// multiples of w since the Unix epoch (in UTC), so every leader folds the
// same deliveries together whatever its clock or zone.
func DigestRelease(t time.Time, w time.Duration) time.Time {
	if w <= 0 {
		return t
	}
	ns := t.UnixNano()
	start := ns - ((ns%int64(w))+int64(w))%int64(w)
	return time.Unix(0, start).UTC().Add(w)
}

// Timing is when a planned message goes and until when it may.
type Timing struct {
	Offset    time.Duration // the stagger's offset from the base
	SendAt    time.Time     // base + offset: when it would go without quiet hours or digest
	NotBefore time.Time     // when it may go
	Deadline  time.Time     // not sent by then, it expires
	// Deferred is set when quiet hours moved it: why, for the record
	// ("quiet hours 22:00–08:00 Europe/Berlin until 2026-12-02T08:00:00+01:00").
	Deferred string
	// Expires: deferred past its deadline, it will expire at the deadline.
	Expires bool
}

// Timing computes when recipient p of a run (the i-th of n, with run key
// runKey) may get its message: base (the slot, or the time a backfill was
// fired) plus the stagger; deferred to the end of the recipient's quiet hours
// (in the recipient's zone, else zone) unless the rule is high priority
// and not strict; then, for a digest rule, moved to the end of its digest
// window. It depends only on its arguments, so every leader and every
// preview computes the same times.
func (r Rule) Timing(runKey string, base time.Time, p Planned, i, n int, zone string) Timing {
	deadline := r.Deadline
	if deadline <= 0 {
		deadline = DefaultDeadline
	}
	off := r.Stagger.Offset(runKey, p.Recipient, i, n)
	t := Timing{Offset: off, SendAt: base.Add(off), Deadline: base.Add(deadline)}
	t.NotBefore = t.SendAt
	if !p.Quiet.IsZero() && (r.Priority != heraldtype.PriorityHigh || r.QuietStrict) {
		z := p.Zone
		if z == "" {
			z = zone
		}
		loc := ZoneLocation(z)
		if end, deferred := p.Quiet.Release(t.SendAt, loc); deferred {
			// The stagger goes on after the window, so that everyone deferred
			// does not leave at 08:00:00 sharp.
			t.NotBefore = end.Add(off)
			t.Deferred = fmt.Sprintf("quiet hours %s %s until %s", p.Quiet, loc, end.Format(time.RFC3339))
		}
	}
	t.NotBefore = DigestRelease(t.NotBefore, r.Digest)
	if !t.NotBefore.Before(t.Deadline) {
		// Looked at when its deadline passes, and expired then: never sent
		// inside the window, never left waiting past the deadline.
		t.NotBefore, t.Expires = t.Deadline, true
	}
	return t
}

// DigestItem is one delivery folded into a digest, as the rule's
// digest.message sees it.
type DigestItem struct {
	ID      string
	RunKey  string
	Slot    time.Time
	Zone    string          // the run's zone
	Data    json.RawMessage // the run's data (an API task's); nil for a scheduled run
	Payload json.RawMessage // the message the delivery would have been alone
}

// DigestBuilder is implemented by a RuleSource that can fold a rule's
// deliveries to one person into one message (a rule with a digest). The
// leader calls it outside Apply, before it proposes the fold.
type DigestBuilder interface {
	// Digest builds the one message for recipient out of items (in slot,
	// then run key order). A nil payload and no error mean: send them
	// one by one.
	Digest(ctx context.Context, rule, recipient string, items []DigestItem) (json.RawMessage, error)
}
