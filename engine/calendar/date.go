package calendar

import (
	"errors"
	"fmt"
	"time"
)

// ErrBadDate is returned for text that is not a YYYY-MM-DD date.
var ErrBadDate = errors.New("bad date")

// Date is a civil date (no zone). The zero Date means "no date".
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// DateOf is the civil date of t in t's own location.
func DateOf(t time.Time) Date {
	y, m, d := t.Date()
	return Date{Year: y, Month: m, Day: d}
}

// ParseDate reads "2026-12-01". The date must exist (no 2026-02-30).
func ParseDate(s string) (Date, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return Date{}, fmt.Errorf("%w %q: want YYYY-MM-DD", ErrBadDate, s)
	}
	return DateOf(t), nil
}

// String formats d as "2026-12-01".
func (d Date) String() string {
	return fmt.Sprintf("%04d-%02d-%02d", d.Year, int(d.Month), d.Day)
}

// IsZero reports whether d is the zero Date.
func (d Date) IsZero() bool { return d == Date{} }

// noon is d at midday UTC: a stable instant for date arithmetic, far from
// any day boundary.
func (d Date) noon() time.Time {
	return time.Date(d.Year, d.Month, d.Day, 12, 0, 0, 0, time.UTC)
}

// AddDays is the date n days after d (before it for negative n). A date
// that does not exist, like February 30, is normalised first as time.Date
// does.
func (d Date) AddDays(n int) Date { return DateOf(d.noon().AddDate(0, 0, n)) }

// Weekday is the day of the week of d.
func (d Date) Weekday() time.Weekday { return d.noon().Weekday() }

// Compare returns -1, 0 or +1 as d is before, equal to or after o.
func (d Date) Compare(o Date) int {
	switch {
	case d.Year != o.Year:
		return cmpInt(d.Year, o.Year)
	case d.Month != o.Month:
		return cmpInt(int(d.Month), int(o.Month))
	}
	return cmpInt(d.Day, o.Day)
}

// Before reports whether d is earlier than o.
func (d Date) Before(o Date) bool { return d.Compare(o) < 0 }

// After reports whether d is later than o.
func (d Date) After(o Date) bool { return d.Compare(o) > 0 }

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// In is the instant at wall-clock hour:min:sec on d in loc (nil means UTC).
// Out-of-range fields are normalised as time.Date does.
//
// Around DST transitions it follows the package policy: a time in a
// spring-forward gap becomes the first instant after the gap (the next valid
// wall-clock time), and a time that happens twice is its first occurrence.
// time.Date alone leaves both choices unspecified.
func (d Date) In(loc *time.Location, hour, min, sec int) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	t := time.Date(d.Year, d.Month, d.Day, hour, min, sec, 0, loc)
	want := time.Date(d.Year, d.Month, d.Day, hour, min, sec, 0, time.UTC).Unix()
	if wallUnix(t) == want {
		// It exists; if the zone in force began just before, the same wall
		// clock may also have been read in the previous zone, earlier.
		start, _ := t.ZoneBounds()
		if start.IsZero() {
			return t
		}
		_, prevOff := start.Add(-time.Nanosecond).In(loc).Zone()
		if e := time.Unix(want-int64(prevOff), 0).In(loc); e.Before(start) && wallUnix(e) == want {
			return e
		}
		return t
	}
	// A gap: time.Date read the wall clock with the offset of one side of
	// the transition. The instant we want is the transition itself, the
	// first whose wall clock is past the requested one.
	start, end := t.ZoneBounds()
	var edge time.Time
	if wallUnix(t) < want {
		edge = end
	} else {
		edge = start
	}
	if edge.IsZero() {
		return t
	}
	return edge.In(loc)
}

// wallUnix is t's wall clock read as if it were UTC, in Unix seconds.
func wallUnix(t time.Time) int64 {
	_, off := t.Zone()
	return t.Unix() + int64(off)
}
