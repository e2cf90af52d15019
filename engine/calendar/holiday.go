package calendar

import (
	"sync"

	"github.com/6tail/lunar-go/HolidayUtil"
)

// cnDay is one day of lunar-go's statutory holiday table: a day off for the
// named holiday, or a make-up workday (调休) for it.
type cnDay struct {
	name string
	work bool
}

// cnTable is lunar-go's table indexed by date, with the first and last
// years it covers.
type cnTable struct {
	days        map[Date]cnDay
	first, last int
}

// The probe window for lunar-go's data. Its table starts in 2001; the upper
// bound leaves room for many future releases and costs well under a
// millisecond once.
const (
	cnProbeFirst = 1990
	cnProbeLast  = 2200
)

// cnData indexes lunar-go's table once. HolidayUtil searches a long string
// on every call, too slow for a scheduler that asks about every day of a
// five-year horizon; a map is also safe for concurrent reads. We never call
// HolidayUtil.Fix, which rewrites lunar-go's globals.
var cnData = sync.OnceValue(func() cnTable {
	tab := cnTable{days: make(map[Date]cnDay)}
	for y := cnProbeFirst; y <= cnProbeLast; y++ {
		l := HolidayUtil.GetHolidaysByYear(y)
		for e := l.Front(); e != nil; e = e.Next() {
			h, ok := e.Value.(*HolidayUtil.Holiday)
			if !ok {
				continue
			}
			d, err := ParseDate(h.GetDay())
			if err != nil || d.Year != y {
				continue
			}
			tab.days[d] = cnDay{name: h.GetName(), work: h.IsWork()}
			if tab.first == 0 || y < tab.first {
				tab.first = y
			}
			if y > tab.last {
				tab.last = y
			}
		}
	}
	return tab
})

// HolidayDataRange is the first and last year that lunar-go's mainland
// China holiday table covers. Outside it, cn_workday is plain Monday–Friday
// and Holiday and MakeupWorkday report nothing.
func HolidayDataRange() (first, last int) {
	t := cnData()
	return t.first, t.last
}

// Holiday is the name of the mainland China statutory holiday (e.g. "国庆节")
// for which d is a day off. A weekend inside a holiday period counts; an
// ordinary weekend does not.
func Holiday(d Date) (name string, ok bool) {
	h, found := cnData().days[d]
	if !found || h.work {
		return "", false
	}
	return h.name, true
}

// MakeupWorkday is the name of the holiday for which d is a make-up workday
// (调休), usually a Saturday or Sunday.
func MakeupWorkday(d Date) (name string, ok bool) {
	h, found := cnData().days[d]
	if !found || !h.work {
		return "", false
	}
	return h.name, true
}
