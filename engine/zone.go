package engine

import (
	"fmt"
	"sync"
	"time"
)

// zones caches loaded zones by name: time.LoadLocation reads and parses
// the zone data on every call, and zones are looked up per run, per
// recipient and per request. Only zones that load are kept, so the cache
// holds at most the zone database's names however many bad names callers
// (an API query's ?tz=, a rule) try.
var zones sync.Map // string -> *time.Location

// LoadLocation is time.LoadLocation, cached, with its errors as they are:
// "" and "UTC" are UTC, "Local" is the machine's zone. It is the one
// loader every layer goes through; LoadZone and ZoneLocation apply the
// rules of display zones and of replicated zone names on top of it, and a
// caller that refuses "Local" (rules must not depend on the machine)
// checks that before calling.
func LoadLocation(name string) (*time.Location, error) {
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, loc)
	return loc, nil
}

// LoadZone loads a display zone: "" and "Local" are the machine's zone.
// The error says what a good name looks like.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return time.Local, nil
	}
	loc, err := LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w (want an IANA name such as Asia/Shanghai, or UTC)", name, err)
	}
	return loc, nil
}

// ZoneLocation is the location of a zone name kept in the state (a run's
// or a rule's zone): "" is UTC, and so is a name that does not load, since
// the name was checked when its rule loaded and a run must still be
// counted and shown somewhere.
func ZoneLocation(zone string) *time.Location {
	loc, err := LoadLocation(zone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// SlotDate is slot's date (YYYY-MM-DD) in zone (UTC when zone is empty
// or unknown): the date a run's statistics are counted under.
func SlotDate(slot time.Time, zone string) string {
	return slot.In(ZoneLocation(zone)).Format(time.DateOnly)
}
