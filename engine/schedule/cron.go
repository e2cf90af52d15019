package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/heraldhq/herald/engine/calendar"
)

// parser reads 5 fields, 6 with leading seconds, and descriptors.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// starBit is robfig/cron's mark on a field written as "*" or "?"; it
// decides whether day-of-month and day-of-week must both match (a test
// pins it to the vendored version).
const starBit = 1 << 63

const cronHelp = "want 5 fields (minute hour day-of-month month day-of-week), 6 with leading seconds, " +
	"or @yearly, @monthly, @weekly, @daily, @midnight, @hourly, @every <duration>"

var (
	fieldNames5 = []string{"minute", "hour", "day-of-month", "month", "day-of-week"}
	fieldNames6 = append([]string{"second"}, fieldNames5...)
)

// parseCron fills s's cron fields, or s.every, from text.
func (s *Schedule) parseCron(text string) error {
	text = strings.TrimSpace(text)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrBadCron, text, fmt.Sprintf(format, args...))
	}
	if text == "" {
		return bad("empty; %s", cronHelp)
	}
	// robfig accepts a zone prefix (and panics on "TZ=UTC" alone); the zone
	// belongs in the timezone field, where it is checked.
	if strings.HasPrefix(text, "TZ=") || strings.HasPrefix(text, "CRON_TZ=") {
		return bad("put the zone in timezone, not in the cron text")
	}
	if rest, ok := strings.CutPrefix(text, "@every"); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		switch {
		case err != nil:
			return bad("@every: %v; want a duration like 30s, 15m or 1h30m", err)
		case d < time.Second || d%time.Second != 0:
			return bad("@every %s: want a whole number of seconds, at least 1s", d)
		}
		s.every = d
		return nil
	}
	if strings.HasPrefix(text, "@") {
		if _, err := parser.Parse(text); err != nil {
			return bad("unknown descriptor; %s", cronHelp)
		}
	}
	fields := strings.Fields(text)
	if !strings.HasPrefix(text, "@") && len(fields) != 5 && len(fields) != 6 {
		return bad("%d fields; %s", len(fields), cronHelp)
	}
	parsed, err := parser.Parse(text)
	if err != nil {
		return badField(text, fields, err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return bad("unsupported schedule %T", parsed)
	}
	s.seconds = bitList(spec.Second, 59)
	s.minutes = bitList(spec.Minute, 59)
	s.hours = bitList(spec.Hour, 23)
	s.dom, s.month, s.dow = spec.Dom, spec.Month, spec.Dow
	s.domDowAnd = spec.Dom&starBit != 0 || spec.Dow&starBit != 0
	if len(s.seconds) == 0 || len(s.minutes) == 0 || len(s.hours) == 0 {
		return bad("matches no time of day")
	}
	return nil
}

// badField finds which field robfig refused: it parses the spec again with
// every other field set to "*", one field at a time.
func badField(text string, fields []string, cause error) error {
	names := fieldNames5
	if len(fields) == 6 {
		names = fieldNames6
	}
	for i := range fields {
		probe := make([]string, len(fields))
		for j := range probe {
			probe[j] = "*"
		}
		probe[i] = fields[i]
		if _, err := parser.Parse(strings.Join(probe, " ")); err != nil {
			return fmt.Errorf("%w %q: %s field %q: %v", ErrBadCron, text, names[i], fields[i], err)
		}
	}
	return fmt.Errorf("%w %q: %v", ErrBadCron, text, cause)
}

// bitList lists the set bits of b up to hi, ascending.
func bitList(b uint64, hi int) []int {
	var out []int
	for i := 0; i <= hi; i++ {
		if b&(1<<uint(i)) != 0 {
			out = append(out, i)
		}
	}
	return out
}

// dayMatches applies the month and day fields to d, as robfig/cron does.
func (s *Schedule) dayMatches(d calendar.Date) bool {
	domOK := s.dom&(1<<uint(d.Day)) != 0
	dowOK := s.dow&(1<<uint(d.Weekday())) != 0
	if s.domDowAnd {
		return domOK && dowOK
	}
	return domOK || dowOK
}

func (s *Schedule) monthMatches(m time.Month) bool { return s.month&(1<<uint(m)) != 0 }

// nextCron finds the first slot after after. It walks civil days in the
// zone. Without next_workday, slots keep the order of their days and the
// first one after after wins. With it, a slot on a non-workday lands on a
// later day, possibly after the slots of that day, so the walk starts at the
// first day of the run of non-workdays before after, keeps the least
// candidate, and stops once the days themselves are past it.
func (s *Schedule) nextCron(after time.Time) (time.Time, bool) {
	cal := s.calendar()
	// The day before too: a repeated hour around midnight can put after on
	// an earlier civil date than a slot that precedes it.
	start := calendar.DateOf(after.In(s.loc)).AddDays(-1)
	if cal != nil && s.toNextW {
		for i := 0; i < calendar.MaxWorkdaySearch && !cal.IsWorkday(start.AddDays(-1)); i++ {
			start = start.AddDays(-1)
		}
	}
	limit := calendar.DateOf(after.In(s.loc)).AddDays(horizonDays)

	var (
		best    time.Time
		bestDay calendar.Date
		found   bool
		shiftTo calendar.Date // next workday of the current run of non-workdays
	)
	for d := start; !d.After(limit); d = d.AddDays(1) {
		if found && d.After(bestDay) {
			break
		}
		if !s.monthMatches(d.Month) {
			d = calendar.Date{Year: d.Year, Month: d.Month + 1, Day: 1}.AddDays(-1) // AddDays normalises month 13
			continue
		}
		if !s.dayMatches(d) {
			continue
		}
		target := d
		if cal != nil && !cal.IsWorkday(d) {
			if !s.toNextW {
				continue
			}
			if shiftTo.IsZero() || !d.Before(shiftTo) {
				shiftTo = calendar.NextWorkday(cal, d)
				if shiftTo.IsZero() {
					break // no workday within a year: nothing to move to
				}
			}
			target = shiftTo
		}
		if t, ok := s.firstOnDay(target, after); ok && (!found || t.Before(best)) {
			best, bestDay, found = t, calendar.DateOf(t), true
		}
	}
	return best, found
}

// firstOnDay is the first slot time on day d that is after after. Date.In
// never decreases as the wall clock advances within a day (gap times share
// one instant, repeats take the first), so an hour or minute whose last slot
// is not after after can be passed over whole.
func (s *Schedule) firstOnDay(d calendar.Date, after time.Time) (time.Time, bool) {
	lastMin, lastSec := s.minutes[len(s.minutes)-1], s.seconds[len(s.seconds)-1]
	for _, h := range s.hours {
		if !d.In(s.loc, h, lastMin, lastSec).After(after) {
			continue
		}
		for _, m := range s.minutes {
			if !d.In(s.loc, h, m, lastSec).After(after) {
				continue
			}
			for _, sec := range s.seconds {
				if t := d.In(s.loc, h, m, sec); t.After(after) {
					return t, true
				}
			}
		}
	}
	return time.Time{}, false
}

// nextEvery finds the next multiple of s.every since the Unix epoch after
// after, passing over non-workdays.
func (s *Schedule) nextEvery(after time.Time) (time.Time, bool) {
	step := int64(s.every / time.Second)
	limit := after.Add(Horizon)
	cal := s.calendar()
	for {
		t := time.Unix((floorDiv(after.Unix(), step)+1)*step, 0).In(s.loc)
		if t.After(limit) {
			return time.Time{}, false
		}
		if cal == nil {
			return t, true
		}
		day := calendar.DateOf(t)
		if cal.IsWorkday(day) {
			return t, true
		}
		next := calendar.NextWorkday(cal, day)
		if next.IsZero() {
			return time.Time{}, false
		}
		after = next.In(s.loc, 0, 0, 0).Add(-time.Nanosecond)
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
