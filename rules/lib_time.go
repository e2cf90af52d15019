package rules

import (
	"errors"
	"fmt"
	"math"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine"
)

// The `time` module. A time is a userdata holding a Go time.Time with its
// zone; it prints as RFC 3339, compares with < <= ==, and has the module's
// functions as methods (t:format("15:04"), t:add("1h")). Wherever a time is
// expected a string is accepted and parsed in the run's zone.
//
// time.now() is the run's slot, never the wall clock: a rule evaluated
// again (by a new leader, or by preview) must produce the same messages.

// parseLayouts are tried in order by time.parse without a layout.
var parseLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02 15:04", time.DateOnly}

// errLocalZone refuses the zone "Local": it is each machine's own, so two
// leaders would disagree (the engine's schedules refuse it too).
var errLocalZone = errors.New(`"Local" depends on the machine; name an IANA zone like Asia/Shanghai`)

// loadZone is the engine's cached loader (rules may convert zones for
// every recipient) with "Local" refused.
func loadZone(name string) (*time.Location, error) {
	if name == "Local" {
		return nil, errLocalZone
	}
	return engine.LoadLocation(name)
}

// zoneError says why a rule's zone name was refused.
func zoneError(name string, err error) string {
	if errors.Is(err, errLocalZone) {
		return err.Error()
	}
	return fmt.Sprintf("unknown zone %q", name)
}

func (sb *sandbox) openTime() {
	L := sb.L
	funcs := map[string]lua.LGFunction{
		"now":      sb.timeNow,
		"parse":    sb.timeParse,
		"format":   sb.timeFormat,
		"add":      sb.timeAdd,
		"add_days": sb.timeAddDays,
		"in_zone":  sb.timeInZone,
		"date":     sb.timeDate,
		"diff":     sb.timeDiff,
		"unix":     sb.timeUnix,
		"weekday":  sb.timeWeekday,
	}
	mod := sb.register("time", funcs)
	mt := L.NewTypeMetatable(timeTypeName)
	mt.RawSetString("__index", mod)
	mt.RawSetString("__metatable", lua.LString(lockedMeta))
	mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LString(sb.checkTime(1, "tostring").Format(time.RFC3339)))
		return 1
	}))
	mt.RawSetString("__concat", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LString(sb.concatPart(1) + sb.concatPart(2)))
		return 1
	}))
	mt.RawSetString("__eq", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LBool(sb.checkTime(1, "==").Equal(sb.checkTime(2, "=="))))
		return 1
	}))
	mt.RawSetString("__lt", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LBool(sb.checkTime(1, "<").Before(sb.checkTime(2, "<"))))
		return 1
	}))
	mt.RawSetString("__le", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LBool(!sb.checkTime(1, "<=").After(sb.checkTime(2, "<="))))
		return 1
	}))
}

func (sb *sandbox) concatPart(n int) string {
	switch v := sb.L.Get(n).(type) {
	case *lua.LUserData:
		if t, ok := v.Value.(time.Time); ok {
			return t.Format(time.RFC3339)
		}
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return v.String()
	}
	sb.L.RaiseError("attempt to concatenate a time with a %s", sb.L.Get(n).Type())
	return ""
}

// pushTime returns t as a Lua time value.
func (sb *sandbox) timeValue(t time.Time) lua.LValue {
	ud := sb.L.NewUserData()
	ud.Value = t
	sb.L.SetMetatable(ud, sb.L.GetTypeMetatable(timeTypeName))
	return ud
}

// zoneOf is the run's zone, UTC at load time.
func (sb *sandbox) zoneOf() *time.Location {
	if sb.run != nil && sb.run.zone != nil {
		return sb.run.zone
	}
	return time.UTC
}

// checkTime reads argument n as a time value or a string in one of
// parseLayouts (in the run's zone).
func (sb *sandbox) checkTime(n int, fn string) time.Time {
	switch v := sb.L.Get(n).(type) {
	case *lua.LUserData:
		if t, ok := v.Value.(time.Time); ok {
			return t
		}
	case lua.LString:
		if t, ok := parseIn(string(v), "", sb.zoneOf()); ok {
			return t
		}
		sb.errorf(fn, "cannot read %q as a time (want RFC 3339 or YYYY-MM-DD [hh:mm[:ss]])", string(v))
	}
	sb.errorf(fn, "argument %d: want a time or a string, got %s", n, sb.L.Get(n).Type())
	return time.Time{}
}

// parseIn parses s with layout, or with each of parseLayouts when layout is
// empty. Layouts without an offset are read in loc.
func parseIn(s, layout string, loc *time.Location) (time.Time, bool) {
	if len(s) > 256 {
		return time.Time{}, false
	}
	layouts := parseLayouts
	if layout != "" {
		layouts = []string{layout}
	}
	for _, l := range layouts {
		if t, err := time.ParseInLocation(l, s, loc); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

func (sb *sandbox) timeNow(L *lua.LState) int {
	run := sb.needRun("time.now")
	L.Push(sb.timeValue(run.slot))
	return 1
}

func (sb *sandbox) timeParse(L *lua.LState) int {
	s := L.CheckString(1)
	layout := L.OptString(2, "")
	loc := sb.zoneOf()
	if z := L.OptString(3, ""); z != "" {
		l, err := loadZone(z)
		if err != nil {
			sb.errorf("time.parse", "%s", zoneError(z, err))
		}
		loc = l
	}
	t, ok := parseIn(s, layout, loc)
	if !ok {
		L.Push(lua.LNil)
		L.Push(lua.LString("cannot parse " + s))
		return 2
	}
	L.Push(sb.timeValue(t))
	return 1
}

func (sb *sandbox) timeFormat(L *lua.LState) int {
	t := sb.checkTime(1, "time.format")
	layout := L.OptString(2, time.RFC3339)
	if len(layout) > 256 {
		sb.errorf("time.format", "layout longer than 256 bytes")
	}
	L.Push(lua.LString(t.Format(layout)))
	return 1
}

// checkDuration reads a Go duration string ("90m", "1h30m") or a number of
// seconds.
func (sb *sandbox) checkDuration(n int, fn string) time.Duration {
	switch v := sb.L.Get(n).(type) {
	case lua.LNumber:
		d, ok := secondsDuration(float64(v))
		if !ok {
			sb.errorf(fn, "%g seconds: out of range", float64(v))
		}
		return d
	case lua.LString:
		d, err := time.ParseDuration(string(v))
		if err != nil {
			sb.errorf(fn, "%v", err)
		}
		return d
	}
	sb.errorf(fn, "argument %d: want a duration like \"90m\" or seconds", n)
	return 0
}

// secondsDuration converts seconds to a Duration; ok is false for NaN and
// for what a Duration cannot hold (about 292 years), whose conversion Go
// leaves to the machine (amd64 and arm64 differ, and leaders must agree).
func secondsDuration(s float64) (time.Duration, bool) {
	ns := s * float64(time.Second)
	if !(math.Abs(ns) < 1<<63) {
		return 0, false
	}
	return time.Duration(ns), true
}

func (sb *sandbox) timeAdd(L *lua.LState) int {
	t := sb.checkTime(1, "time.add")
	L.Push(sb.timeValue(t.Add(sb.checkDuration(2, "time.add"))))
	return 1
}

func (sb *sandbox) timeAddDays(L *lua.LState) int {
	t := sb.checkTime(1, "time.add_days")
	n := L.CheckInt(2)
	if n > 100_000 || n < -100_000 {
		sb.errorf("time.add_days", "%d days is out of range", n)
	}
	L.Push(sb.timeValue(t.AddDate(0, 0, n)))
	return 1
}

func (sb *sandbox) timeInZone(L *lua.LState) int {
	t := sb.checkTime(1, "time.in_zone")
	z := L.CheckString(2)
	loc, err := loadZone(z)
	if err != nil {
		sb.errorf("time.in_zone", "%s", zoneError(z, err))
	}
	L.Push(sb.timeValue(t.In(loc)))
	return 1
}

func (sb *sandbox) timeDate(L *lua.LState) int {
	L.Push(lua.LString(sb.checkTime(1, "time.date").Format(time.DateOnly)))
	return 1
}

func (sb *sandbox) timeDiff(L *lua.LState) int {
	a, b := sb.checkTime(1, "time.diff"), sb.checkTime(2, "time.diff")
	L.Push(lua.LNumber(a.Sub(b).Seconds()))
	return 1
}

func (sb *sandbox) timeUnix(L *lua.LState) int {
	L.Push(lua.LNumber(sb.checkTime(1, "time.unix").Unix()))
	return 1
}

// timeWeekday is the ISO weekday: 1 Monday … 7 Sunday.
func (sb *sandbox) timeWeekday(L *lua.LState) int {
	wd := int(sb.checkTime(1, "time.weekday").Weekday())
	if wd == 0 {
		wd = 7
	}
	L.Push(lua.LNumber(wd))
	return 1
}
