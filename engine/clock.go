package engine

import (
	"fmt"
	"regexp"
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
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: want RFC 3339 (2026-12-01T18:00:00+08:00) or \"2026-12-01 18:00[:00]\" in %s", s, loc)
}

// LoadZone loads a display zone: "" and "Local" are the machine's zone.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return time.Local, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w (want an IANA name such as Asia/Shanghai, or UTC)", name, err)
	}
	return loc, nil
}

var rfc3339InText = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})`)

// LocalizeText rewrites every RFC 3339 time inside text (an alert message,
// written once in the replicated state with the leader's UTC stamps) into
// loc, as ShowTime shows it. The stored message is left alone: the log's
// bytes never change meaning; only what a person reads does.
func LocalizeText(text string, loc *time.Location) string {
	if loc == nil {
		return text
	}
	return rfc3339InText.ReplaceAllStringFunc(text, func(s string) string {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return s
		}
		return ShowTime(t, loc)
	})
}
