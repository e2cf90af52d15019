package rules

import (
	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine/calendar"
)

// The `calendar` module: workdays by any calendar the node knows, the
// statutory holiday of a day, and lunar dates. Dates are "YYYY-MM-DD"
// strings or time values (their date in their own zone). The calendar
// argument defaults to the rule's calendar, else cn_workday.
func (sb *sandbox) openCalendar() {
	sb.register("calendar", map[string]lua.LGFunction{
		"is_workday":     sb.calIsWorkday,
		"next_workday":   sb.calNextWorkday,
		"holiday":        sb.calHoliday,
		"makeup_workday": sb.calMakeupWorkday,
		"lunar":          sb.calLunar,
	})
}

// checkDate reads argument n as a date.
func (sb *sandbox) checkDate(n int, fn string) calendar.Date {
	switch v := sb.L.Get(n).(type) {
	case lua.LString:
		d, err := calendar.ParseDate(string(v))
		if err != nil {
			sb.errorf(fn, "%v", err)
		}
		return d
	case *lua.LUserData:
		return calendar.DateOf(sb.checkTime(n, fn))
	}
	sb.errorf(fn, "argument %d: want a date \"YYYY-MM-DD\" or a time, got %s", n, sb.L.Get(n).Type())
	return calendar.Date{}
}

func (sb *sandbox) checkCalendar(n int, fn string) calendar.Calendar {
	name := sb.L.OptString(n, "")
	if name == "" && sb.run != nil {
		name = sb.run.calendar
	}
	if name == "" {
		name = calendar.CNWorkday
	}
	if sb.env.calendars == nil {
		sb.errorf(fn, "no calendars")
	}
	c, err := sb.env.calendars.Lookup(name)
	if err != nil {
		sb.errorf(fn, "%v", err)
	}
	return c
}

func (sb *sandbox) calIsWorkday(L *lua.LState) int {
	d := sb.checkDate(1, "calendar.is_workday")
	L.Push(lua.LBool(sb.checkCalendar(2, "calendar.is_workday").IsWorkday(d)))
	return 1
}

func (sb *sandbox) calNextWorkday(L *lua.LState) int {
	d := sb.checkDate(1, "calendar.next_workday")
	n := calendar.NextWorkday(sb.checkCalendar(2, "calendar.next_workday"), d)
	if n.IsZero() {
		L.Push(lua.LNil)
	} else {
		L.Push(lua.LString(n.String()))
	}
	return 1
}

func (sb *sandbox) calHoliday(L *lua.LState) int {
	if name, ok := calendar.Holiday(sb.checkDate(1, "calendar.holiday")); ok {
		L.Push(lua.LString(name))
	} else {
		L.Push(lua.LNil)
	}
	return 1
}

func (sb *sandbox) calMakeupWorkday(L *lua.LState) int {
	if name, ok := calendar.MakeupWorkday(sb.checkDate(1, "calendar.makeup_workday")); ok {
		L.Push(lua.LString(name))
	} else {
		L.Push(lua.LNil)
	}
	return 1
}

// calLunar returns {year, month, day, leap, text}, or nil outside the
// years lunar dates are known for.
func (sb *sandbox) calLunar(L *lua.LState) int {
	l := calendar.LunarOf(sb.checkDate(1, "calendar.lunar"))
	if l.Month == 0 {
		L.Push(lua.LNil)
		return 1
	}
	t := L.CreateTable(0, 5)
	t.RawSetString("year", lua.LNumber(l.Year))
	t.RawSetString("month", lua.LNumber(l.Month))
	t.RawSetString("day", lua.LNumber(l.Day))
	t.RawSetString("leap", lua.LBool(l.Leap))
	t.RawSetString("text", lua.LString(l.String()))
	L.Push(t)
	return 1
}
