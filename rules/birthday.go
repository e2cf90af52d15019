package rules

import (
	"time"

	"github.com/heraldhq/herald/engine/calendar"
)

// Birthday policy, as people.birthdays_on applies it:
//
//   - Solar: a 29 February birthday is greeted on 28 February in years
//     that have no 29 February.
//   - Lunar: a birthday on the 30th is greeted on the 29th in a month that
//     has only 29 days. A birthday in a leap month (闰四月) is greeted in
//     that leap month when the year has it, otherwise in the regular month
//     of the same number. A regular-month birthday is never greeted in the
//     leap month that follows it.
//   - Lunar dates are known for 1901..2099 only; outside that range only
//     solar birthdays match.
type birthdayKind string

const (
	birthdaySolar birthdayKind = "solar"
	birthdayLunar birthdayKind = "lunar"
)

// birthdayOn reports whether p is greeted on d, and by which calendar.
// A person whose solar and lunar birthdays fall on the same day is greeted
// once, as solar.
func birthdayOn(p *Person, d calendar.Date, lun calendar.Lunar) (birthdayKind, bool) {
	if p.solar.month != 0 && solarMatch(p.solar, d) {
		return birthdaySolar, true
	}
	if p.lunar.month != 0 && lun.Month != 0 && lunarMatch(p.lunar, lun) {
		return birthdayLunar, true
	}
	return "", false
}

func solarMatch(b monthDay, d calendar.Date) bool {
	if b.month == int(d.Month) && b.day == d.Day {
		return true
	}
	return b.month == 2 && b.day == 29 && d.Month == time.February && d.Day == 28 && !isLeapYear(d.Year)
}

func isLeapYear(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func lunarMatch(b lunarDay, l calendar.Lunar) bool {
	if b.month != l.Month {
		return false
	}
	switch {
	case b.leap == l.Leap:
	case b.leap && !l.Leap && calendar.LeapMonth(l.Year) != b.month:
		// born in a leap month this year does not have: the regular month
	default:
		return false
	}
	if b.day == l.Day {
		return true
	}
	if b.day == 30 && l.Day == 29 {
		_, has30 := calendar.SolarOfLunar(l.Year, l.Month, 30, l.Leap)
		return !has30
	}
	return false
}
