package calendar

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCNWorkday checks cn_workday against lunar-go's 2026 and 2027 data as
// published by the State Council.
func TestCNWorkday(t *testing.T) {
	t.Parallel()
	cn, err := NewRegistry().Lookup(CNWorkday)
	require.NoError(t, err)
	cases := []struct {
		date    string
		workday bool
		holiday string // Holiday name, "" if none
		makeup  string // MakeupWorkday name, "" if none
	}{
		{"2026-01-01", false, "元旦节", ""},
		{"2026-01-04", true, "", "元旦节"}, // Sunday 调休
		{"2026-02-14", true, "", "春节"},  // Saturday 调休
		{"2026-02-16", false, "春节", ""}, // Monday, 除夕 eve period
		{"2026-02-17", false, "春节", ""}, // 正月初一
		{"2026-02-23", false, "春节", ""},
		{"2026-02-24", true, "", ""},
		{"2026-02-28", true, "", "春节"},
		{"2026-04-06", false, "清明节", ""}, // Monday
		{"2026-05-04", false, "劳动节", ""}, // Monday
		{"2026-05-09", true, "", "劳动节"},
		{"2026-06-19", false, "端午节", ""},
		{"2026-09-20", true, "", "国庆节"}, // Sunday 调休
		{"2026-09-25", false, "中秋节", ""},
		{"2026-10-01", false, "国庆节", ""},
		{"2026-10-05", false, "国庆节", ""}, // Monday
		{"2026-10-08", true, "", ""},
		{"2026-10-10", true, "", "国庆节"}, // Saturday 调休
		{"2026-10-11", false, "", ""},   // ordinary Sunday
		{"2026-10-12", true, "", ""},    // ordinary Monday
		{"2027-02-06", false, "春节", ""},
		{"2027-01-31", true, "", "春节"},
		{"2027-10-01", false, "国庆节", ""},
		{"2027-09-26", true, "", "国庆节"},
	}
	for _, c := range cases {
		d := mustDate(t, c.date)
		require.Equal(t, c.workday, cn.IsWorkday(d), "IsWorkday(%s)", c.date)
		name, ok := Holiday(d)
		require.Equal(t, c.holiday, name, "Holiday(%s)", c.date)
		require.Equal(t, c.holiday != "", ok)
		name, ok = MakeupWorkday(d)
		require.Equal(t, c.makeup, name, "MakeupWorkday(%s)", c.date)
		require.Equal(t, c.makeup != "", ok)
	}
}

func TestHolidayDataRange(t *testing.T) {
	t.Parallel()
	first, last := HolidayDataRange()
	require.Equal(t, 2001, first)
	require.GreaterOrEqual(t, last, 2027, "lunar-go lost data: cn_workday would be plain weekdays")
	// Past the data, cn_workday is Monday to Friday.
	cn, err := NewRegistry().Lookup(CNWorkday)
	require.NoError(t, err)
	after := Date{last + 1, time.October, 1}
	require.Equal(t, after.Weekday() != time.Saturday && after.Weekday() != time.Sunday, cn.IsWorkday(after))
	_, ok := Holiday(after)
	require.False(t, ok)
}

func TestBuiltins(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	require.Equal(t, []string{CNWorkday, EveryDay, Weekday}, r.Names())
	wd, err := r.Lookup(Weekday)
	require.NoError(t, err)
	ed, err := r.Lookup(EveryDay)
	require.NoError(t, err)
	// 2026-10-01 is a Thursday holiday in China, a workday elsewhere.
	require.True(t, wd.IsWorkday(mustDate(t, "2026-10-01")))
	require.False(t, wd.IsWorkday(mustDate(t, "2026-10-03")))
	require.True(t, ed.IsWorkday(mustDate(t, "2026-10-03")))
	require.Equal(t, Weekday, wd.Name())
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	_, err := r.Lookup("acme")
	require.ErrorIs(t, err, ErrUnknownCalendar)
	require.Contains(t, err.Error(), `"acme"`)

	acme, err := ParseFile("acme", []byte("base: weekday\n"))
	require.NoError(t, err)
	require.NoError(t, r.Register("acme", acme))
	require.ErrorIs(t, r.Register("acme", acme), ErrDuplicateCalendar)
	require.ErrorIs(t, r.Register(CNWorkday, acme), ErrDuplicateCalendar)
	require.ErrorIs(t, r.Register("", acme), ErrBadCalendar)
	require.ErrorIs(t, r.Register("x", nil), ErrBadCalendar)
	got, err := r.Lookup("acme")
	require.NoError(t, err)
	require.Equal(t, "acme", got.Name())

	require.NoError(t, r.Set("acme", acme))
	require.ErrorIs(t, r.Set(Weekday, acme), ErrBuiltinCalendar)
	require.False(t, r.Remove(Weekday))
	require.True(t, r.Remove("acme"))
	require.False(t, r.Remove("acme"))
	_, err = r.Lookup("acme")
	require.ErrorIs(t, err, ErrUnknownCalendar)
}

func TestRegistryConcurrent(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	acme, err := ParseFile("acme", []byte("base: weekday\n"))
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			_ = r.Set(fmt.Sprintf("c%d", i%5), acme)
		}
	}()
	for range 200 {
		c, err := r.Lookup(CNWorkday)
		require.NoError(t, err)
		c.IsWorkday(mustDate(t, "2026-10-01"))
	}
	<-done
}

func TestNextPrevWorkday(t *testing.T) {
	t.Parallel()
	cn, err := NewRegistry().Lookup(CNWorkday)
	require.NoError(t, err)
	cases := []struct{ from, next, prev string }{
		{"2026-09-30", "2026-10-08", "2026-09-29"}, // across 国庆 (10-01..07)
		{"2026-10-08", "2026-10-09", "2026-09-30"},
		{"2026-10-09", "2026-10-10", "2026-10-08"}, // Saturday 调休 is next
		{"2026-02-13", "2026-02-14", "2026-02-12"},
		{"2026-02-14", "2026-02-24", "2026-02-13"}, // across 春节
	}
	for _, c := range cases {
		d := mustDate(t, c.from)
		require.Equal(t, c.next, NextWorkday(cn, d).String(), "next after %s", c.from)
		require.Equal(t, c.prev, PrevWorkday(cn, d).String(), "prev before %s", c.from)
	}
	never, err := ParseFile("never", []byte("base: weekday\nworkdays: []\n"))
	require.NoError(t, err)
	require.Equal(t, "2026-10-12", NextWorkday(never, mustDate(t, "2026-10-09")).String())
	require.True(t, NextWorkday(noWorkdays{}, mustDate(t, "2026-10-09")).IsZero())
	require.True(t, PrevWorkday(noWorkdays{}, mustDate(t, "2026-10-09")).IsZero())
}

type noWorkdays struct{}

func (noWorkdays) Name() string        { return "none" }
func (noWorkdays) IsWorkday(Date) bool { return false }
