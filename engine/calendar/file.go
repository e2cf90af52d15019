package calendar

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// ErrCalendarFile is wrapped by every error from ParseFile.
var ErrCalendarFile = errors.New("bad calendar file")

// A company calendar file is YAML:
//
//	base: cn_workday          # required: cn_workday, weekday or every_day
//	holidays: [2026-12-24]    # days off, whatever the base says
//	workdays: [2026-12-27]    # workdays, whatever the base says
//
// Unknown keys are errors, so a typo ("holiday:") is not silently ignored.
const (
	fieldBase     = "base"
	fieldHolidays = "holidays"
	fieldWorkdays = "workdays"
)

// fileCalendar is a built-in base with days overridden by a company file.
type fileCalendar struct {
	name     string
	base     Calendar
	holidays map[Date]bool
	workdays map[Date]bool
}

func (c *fileCalendar) Name() string { return c.name }

func (c *fileCalendar) IsWorkday(d Date) bool {
	switch {
	case c.holidays[d]:
		return false
	case c.workdays[d]:
		return true
	}
	return c.base.IsWorkday(d)
}

// ParseFile reads a company calendar file and returns it as a calendar
// called name. Errors wrap ErrCalendarFile and name the field and line.
func ParseFile(name string, data []byte) (Calendar, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty calendar name", ErrCalendarFile)
	}
	fail := func(line int, format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		if line > 0 {
			return fmt.Errorf("%w: calendar %q line %d: %s", ErrCalendarFile, name, line, msg)
		}
		return fmt.Errorf("%w: calendar %q: %s", ErrCalendarFile, name, msg)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fail(0, "%v", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, fail(0, "empty file; want %s, %s and %s", fieldBase, fieldHolidays, fieldWorkdays)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fail(root.Line, "want a mapping with %s, %s and %s", fieldBase, fieldHolidays, fieldWorkdays)
	}
	cal := &fileCalendar{name: name, holidays: map[Date]bool{}, workdays: map[Date]bool{}}
	seen := map[string]int{}    // field -> line
	listed := map[Date]string{} // date -> "holidays[2] (line 7)"
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], root.Content[i+1]
		if prev, dup := seen[key.Value]; dup {
			return nil, fail(key.Line, "%s: given twice (first on line %d)", short(key.Value), prev)
		}
		seen[key.Value] = key.Line
		switch key.Value {
		case fieldBase:
			if val.Kind != yaml.ScalarNode {
				return nil, fail(val.Line, "%s: want one of %s", fieldBase, strings.Join(builtinNames, ", "))
			}
			b, ok := builtin(val.Value)
			if !ok {
				return nil, fail(val.Line, "%s: %q is not a built-in calendar; want one of %s",
					fieldBase, short(val.Value), strings.Join(builtinNames, ", "))
			}
			cal.base = b
		case fieldHolidays, fieldWorkdays:
			set := cal.holidays
			if key.Value == fieldWorkdays {
				set = cal.workdays
			}
			if err := parseDates(key.Value, val, set, listed, fail); err != nil {
				return nil, err
			}
		default:
			return nil, fail(key.Line, "unknown field %q; want %s, %s or %s",
				short(key.Value), fieldBase, fieldHolidays, fieldWorkdays)
		}
	}
	if cal.base == nil {
		return nil, fail(root.Line, "%s: missing; want one of %s", fieldBase, strings.Join(builtinNames, ", "))
	}
	return cal, nil
}

// parseDates reads a YAML list of dates into set. listed remembers where
// each date appeared so a day listed twice, or as both a holiday and a
// workday, is reported with both places.
func parseDates(field string, val *yaml.Node, set map[Date]bool, listed map[Date]string,
	fail func(int, string, ...any) error) error {
	if val.Kind == yaml.ScalarNode && val.Tag == "!!null" {
		return nil // "holidays:" with nothing after it
	}
	if val.Kind != yaml.SequenceNode {
		return fail(val.Line, "%s: want a list of dates like [2026-12-24]", field)
	}
	for i, item := range val.Content {
		where := fmt.Sprintf("%s[%d] (line %d)", field, i, item.Line)
		if item.Kind != yaml.ScalarNode {
			return fail(item.Line, "%s[%d]: want a date like 2026-12-24", field, i)
		}
		d, err := ParseDate(item.Value)
		if err != nil {
			// Not err: time's message quotes the whole value.
			return fail(item.Line, "%s[%d]: %q is not a date (want YYYY-MM-DD, e.g. 2026-12-24)", field, i, short(item.Value))
		}
		if prev, dup := listed[d]; dup {
			return fail(item.Line, "%s[%d]: %s is already listed as %s", field, i, d, prev)
		}
		listed[d] = where
		set[d] = true
	}
	return nil
}

var _ Calendar = (*fileCalendar)(nil)

// maxQuoted bounds what an error quotes of the file: errors reach
// /v1/status, and a file that is not a calendar at all (a link to a
// secret) must not be quoted there beyond its line and a short token.
const maxQuoted = 24

// short is s cut to maxQuoted bytes on a rune boundary, marked.
func short(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
