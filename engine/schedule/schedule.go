package schedule

import (
	"errors"
	"fmt"
	"time"
	// Embedded zone data, so a node without /usr/share/zoneinfo (a slim
	// container) still knows every IANA zone. The system copy wins when
	// present.
	_ "time/tzdata"

	"github.com/heraldhq/herald/engine/calendar"
)

// Errors from New. Each wraps the offending value and what was wanted.
var (
	// ErrBadCron: the cron text does not parse; the message names the field.
	ErrBadCron = errors.New("bad cron")
	// ErrUnknownZone: the time zone is not an IANA zone name.
	ErrUnknownZone = errors.New("unknown time zone")
	// ErrUnknownCalendar: no such calendar in the registry. It is
	// calendar.ErrUnknownCalendar, so either name matches with errors.Is.
	ErrUnknownCalendar = calendar.ErrUnknownCalendar
	// ErrBadShift: the shift is not "", "skip" or "next_workday", or does
	// not fit the rest of the spec.
	ErrBadShift = errors.New("bad shift")
)

// Shift policies for a slot on a non-workday.
const (
	ShiftSkip        = "skip"         // drop the slot (also the meaning of "")
	ShiftNextWorkday = "next_workday" // same wall-clock time on the next workday
)

// Horizon is how far ahead Next looks before it reports no slot.
const Horizon = horizonDays * 24 * time.Hour

const horizonDays = 5 * 366

// Spec is a rule's trigger as written in its rule file.
type Spec struct {
	Cron     string // 5 or 6 fields, or @yearly … @hourly, @every <duration>
	Timezone string // IANA zone; empty means UTC
	Calendar string // registered calendar name; empty means every day
	Shift    string // "", "skip" or "next_workday"
}

// Schedule yields the slots of a Spec. It is immutable and safe for
// concurrent use.
type Schedule struct {
	spec  Spec
	loc   *time.Location
	every time.Duration // > 0 for @every, else the cron fields below are used

	// Cron fields, from robfig/cron's parse.
	seconds, minutes, hours []int // ascending
	dom, month, dow         uint64
	domDowAnd               bool // robfig: both day fields must match when either is "*"

	cals    *calendar.Registry
	cal     calendar.Calendar // as resolved by New; used if it leaves the registry
	toNextW bool              // ShiftNextWorkday
}

// New checks spec and builds its schedule. cals resolves spec.Calendar and
// may be nil when spec.Calendar is empty.
func New(spec Spec, cals *calendar.Registry) (*Schedule, error) {
	s := &Schedule{spec: spec, cals: cals}
	switch spec.Shift {
	case "", ShiftSkip:
	case ShiftNextWorkday:
		if spec.Calendar == "" {
			return nil, fmt.Errorf("%w %q: it needs a calendar to know which days are workdays", ErrBadShift, spec.Shift)
		}
		s.toNextW = true
	default:
		return nil, fmt.Errorf("%w %q: want %q or %q", ErrBadShift, spec.Shift, ShiftSkip, ShiftNextWorkday)
	}

	loc, err := loadZone(spec.Timezone)
	if err != nil {
		return nil, err
	}
	s.loc = loc

	if spec.Calendar != "" {
		if cals == nil {
			return nil, fmt.Errorf("%w %q: no calendar registry", ErrUnknownCalendar, spec.Calendar)
		}
		c, err := cals.Lookup(spec.Calendar)
		if err != nil {
			return nil, err
		}
		s.cal = c
	}

	if err := s.parseCron(spec.Cron); err != nil {
		return nil, err
	}
	if s.every > 0 && s.toNextW {
		return nil, fmt.Errorf("%w %q: %q slots are not tied to a time of day; use %q",
			ErrBadShift, spec.Shift, spec.Cron, ShiftSkip)
	}
	return s, nil
}

// loadZone loads a schedule's zone with this package's errors. It cannot
// use engine.LoadLocation, the cached loader everything else shares:
// engine's own tests import this package, so importing engine here would
// be a cycle. A schedule is built per rule (at a load, a fire, a stats
// page), not per recipient, so loading uncached costs little.
func loadZone(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		// Different on every machine: two leaders would disagree.
		return nil, fmt.Errorf("%w %q: it depends on the machine; name an IANA zone like Asia/Shanghai", ErrUnknownZone, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w %q: want an IANA zone like Asia/Shanghai (%v)", ErrUnknownZone, name, err)
	}
	return loc, nil
}

// Spec is the spec the schedule was built from.
func (s *Schedule) Spec() Spec { return s.spec }

// Location is the zone slots are computed and returned in.
func (s *Schedule) Location() *time.Location { return s.loc }

// String is the spec in one line, for logs and the CLI.
func (s *Schedule) String() string {
	out := fmt.Sprintf("%q in %s", s.spec.Cron, s.loc)
	if s.spec.Calendar != "" {
		shift := s.spec.Shift
		if shift == "" {
			shift = ShiftSkip
		}
		out += fmt.Sprintf(" on %s (%s)", s.spec.Calendar, shift)
	}
	return out
}

// Next is the first slot strictly after after, in Location. It is false if
// there is none within Horizon.
func (s *Schedule) Next(after time.Time) (time.Time, bool) {
	if s.every > 0 {
		return s.nextEvery(after)
	}
	return s.nextCron(after)
}

// NextN is up to n slots after after, strictly increasing. It is shorter
// than n only when the schedule runs out within Horizon of the last one.
func (s *Schedule) NextN(after time.Time, n int) []time.Time {
	var out []time.Time
	for range max(n, 0) {
		t, ok := s.Next(after)
		if !ok {
			break
		}
		out = append(out, t)
		after = t
	}
	return out
}

// calendar is the calendar in force now: the registry's current entry, so
// an edited company file applies at once, else the one New resolved.
func (s *Schedule) calendar() calendar.Calendar {
	if s.cal == nil {
		return nil
	}
	if c, err := s.cals.Lookup(s.spec.Calendar); err == nil {
		return c
	}
	return s.cal
}
