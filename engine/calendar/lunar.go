package calendar

import (
	"time"

	"github.com/6tail/lunar-go/LunarUtil"
	lunar "github.com/6tail/lunar-go/calendar"
)

// The Gregorian years that lunar conversion accepts. lunar-go computes far
// beyond this, but it panics on some inputs outside its tested range, and
// no notification needs a lunar date outside it.
const (
	LunarMinYear = 1901
	LunarMaxYear = 2099
)

// Lunar is a date in the Chinese lunar calendar. Month is 1..12; Leap marks
// the intercalary month (闰月) that follows the regular month of that number.
// The zero Lunar means "no date".
type Lunar struct {
	Year, Month, Day int
	Leap             bool
}

// LunarOf is the lunar date of d. It is the zero Lunar for a date outside
// LunarMinYear..LunarMaxYear or one that does not exist.
func LunarOf(d Date) Lunar {
	if d.Year < LunarMinYear || d.Year > LunarMaxYear || d.AddDays(0) != d {
		return Lunar{}
	}
	l := lunar.NewSolarFromYmd(d.Year, int(d.Month), d.Day).GetLunar()
	m := l.GetMonth()
	return Lunar{Year: l.GetYear(), Month: abs(m), Day: l.GetDay(), Leap: m < 0}
}

// String is the Chinese month and day, e.g. "腊月初八" or "闰六月十五",
// with lunar-go's names. An invalid Lunar gives "".
func (l Lunar) String() string {
	if l.Month < 1 || l.Month >= len(LunarUtil.MONTH) || l.Day < 1 || l.Day >= len(LunarUtil.DAY) {
		return ""
	}
	s := LunarUtil.MONTH[l.Month] + "月" + LunarUtil.DAY[l.Day]
	if l.Leap {
		s = "闰" + s
	}
	return s
}

// Solar is the Gregorian date of l; false if l does not exist.
func (l Lunar) Solar() (Date, bool) { return SolarOfLunar(l.Year, l.Month, l.Day, l.Leap) }

// SolarOfLunar is the Gregorian date of a lunar date. It is false if that
// day does not exist: 三十 of a 29-day month, a leap month the year does not
// have, or a year outside LunarMinYear..LunarMaxYear.
func SolarOfLunar(year, month, day int, leap bool) (Date, bool) {
	if year < LunarMinYear || year > LunarMaxYear || month < 1 || month > 12 || day < 1 || day > 30 {
		return Date{}, false
	}
	m := month
	if leap {
		m = -month // lunar-go numbers a leap month negatively
	}
	lm := lunar.NewLunarYear(year).GetMonth(m)
	if lm == nil || day > lm.GetDayCount() {
		return Date{}, false
	}
	s := lunar.NewSolarFromJulianDay(lm.GetFirstJulianDay() + float64(day-1))
	return Date{Year: s.GetYear(), Month: time.Month(s.GetMonth()), Day: s.GetDay()}, true
}

// LeapMonth is the number of the leap month in lunar year year, 0 if none.
func LeapMonth(year int) int {
	if year < LunarMinYear || year > LunarMaxYear {
		return 0
	}
	return lunar.NewLunarYear(year).GetLeapMonth()
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
