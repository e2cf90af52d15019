package engine

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// ShowLayout is how a time is shown to a person: to the second, with its
// offset, so that a reader never has to guess the zone.
const ShowLayout = "2006-01-02 15:04:05 -07:00"

// ShowTime formats t in loc with ShowLayout; "-" for the zero time.
func ShowTime(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "-"
	}
	if loc == nil {
		loc = time.UTC
	}
	return t.In(loc).Format(ShowLayout)
}

// localLayouts are the forms of a typed time without an offset, read in the
// reader's zone. "2026-12-01T18:00" (RFC 3339 with its offset forgotten)
// stays an error: a program that drops the offset should hear about it.
var localLayouts = []string{"2006-01-02 15:04:05", "2006-01-02 15:04"}

// ErrWallClock means a local time names no single instant in its zone:
// the clocks skip it, or show it twice, when daylight saving time starts
// or ends.
var ErrWallClock = errors.New("local time names no single instant")

// ParseTime reads a time a person typed: RFC 3339 (with its offset), or
// "YYYY-MM-DD HH:MM[:SS]" in loc.
func ParseTime(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if loc == nil {
		loc = time.UTC
	}
	for _, layout := range localLayouts {
		wall, err := time.Parse(layout, s) // the fields typed, as if in UTC
		if err != nil {
			continue
		}
		switch at := instantsAt(wall, loc); len(at) {
		case 1:
			return at[0], nil
		case 0:
			return time.Time{}, fmt.Errorf("%w: %q does not exist in %s (the clocks skip it); give an offset (RFC 3339)", ErrWallClock, s, loc)
		default:
			return time.Time{}, fmt.Errorf("%w: %q happens twice in %s; give its offset: %s or %s", ErrWallClock, s, loc,
				at[0].Format(time.RFC3339), at[1].Format(time.RFC3339))
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: want RFC 3339 (2026-12-01T18:00:00+08:00) or \"2026-12-01 18:00[:00]\" in %s", s, loc)
}

// instantsAt lists, earliest first, the instants whose wall clock in loc
// reads wall (wall's fields, read as UTC): one, except when daylight
// saving time starts (none) or ends (two). Each offset loc uses within a
// day of wall is tried, so a change that day is seen.
func instantsAt(wall time.Time, loc *time.Location) []time.Time {
	var out []time.Time
	seen := map[int]bool{}
	for _, probe := range []time.Time{wall.Add(-24 * time.Hour), wall, wall.Add(24 * time.Hour)} {
		_, off := probe.In(loc).Zone()
		if seen[off] {
			continue
		}
		seen[off] = true
		t := wall.Add(-time.Duration(off) * time.Second).In(loc)
		if _, o := t.Zone(); o == off && t.Format(time.DateTime) == wall.Format(time.DateTime) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// rfc3339InText finds a time in a text, with the character before it: one
// after an "@" is part of a run key (rule@slot), a name to copy, not a
// time to read.
var rfc3339InText = regexp.MustCompile(`(^|[^@\w])(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}))`)

// LocalizeText rewrites every RFC 3339 time inside text (an alert message,
// written once in the replicated state with the leader's UTC stamps) into
// loc, as ShowTime shows it. The stored message is left alone: the log's
// bytes never change meaning; only what a person reads does.
func LocalizeText(text string, loc *time.Location) string {
	if loc == nil {
		return text
	}
	return rfc3339InText.ReplaceAllStringFunc(text, func(s string) string {
		m := rfc3339InText.FindStringSubmatch(s)
		t, err := time.Parse(time.RFC3339Nano, m[2])
		if err != nil {
			return s
		}
		return m[1] + ShowTime(t, loc)
	})
}
