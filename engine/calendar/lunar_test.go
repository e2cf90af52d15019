package calendar

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLunarOf(t *testing.T) {
	t.Parallel()
	cases := []struct {
		solar string
		want  Lunar
		text  string
	}{
		{"2026-02-17", Lunar{2026, 1, 1, false}, "正月初一"},
		{"2026-02-16", Lunar{2025, 12, 29, false}, "腊月廿九"}, // 除夕 of a 29-day 腊月
		{"2026-09-25", Lunar{2026, 8, 15, false}, "八月十五"},  // 中秋
		{"2027-01-15", Lunar{2026, 12, 8, false}, "腊月初八"},  // 腊八
		{"2025-08-08", Lunar{2025, 6, 15, true}, "闰六月十五"},
		{"2025-07-10", Lunar{2025, 6, 16, false}, "六月十六"},
		{"2027-02-06", Lunar{2027, 1, 1, false}, "正月初一"},
	}
	for _, c := range cases {
		d := mustDate(t, c.solar)
		got := LunarOf(d)
		require.Equal(t, c.want, got, c.solar)
		require.Equal(t, c.text, got.String())
		back, ok := got.Solar()
		require.True(t, ok)
		require.Equal(t, d, back, "round trip of %s", c.solar)
	}
	require.Equal(t, Lunar{}, LunarOf(Date{}))
	require.Equal(t, Lunar{}, LunarOf(Date{2026, 2, 30}))
	require.Equal(t, Lunar{}, LunarOf(Date{3000, 1, 1}))
	require.Equal(t, "", Lunar{}.String())
	require.Equal(t, "", Lunar{2026, 13, 1, false}.String())
}

func TestSolarOfLunar(t *testing.T) {
	t.Parallel()
	d, ok := SolarOfLunar(2026, 1, 1, false)
	require.True(t, ok)
	require.Equal(t, "2026-02-17", d.String())

	// 2025's 腊月 has 29 days, so there is no 腊月三十 (除夕 is 廿九).
	_, ok = SolarOfLunar(2025, 12, 30, false)
	require.False(t, ok)
	d, ok = SolarOfLunar(2025, 12, 29, false)
	require.True(t, ok)
	require.Equal(t, "2026-02-16", d.String())

	// Leap months exist only in their year.
	require.Equal(t, 6, LeapMonth(2025))
	require.Equal(t, 0, LeapMonth(2026))
	d, ok = SolarOfLunar(2025, 6, 1, true)
	require.True(t, ok)
	require.Equal(t, "2025-07-25", d.String())
	_, ok = SolarOfLunar(2026, 6, 1, true)
	require.False(t, ok)

	for _, bad := range [][3]int{{2026, 0, 1}, {2026, 13, 1}, {2026, 1, 0}, {2026, 1, 31}, {1800, 1, 1}, {3000, 1, 1}} {
		_, ok := SolarOfLunar(bad[0], bad[1], bad[2], false)
		require.False(t, ok, "%v", bad)
	}
}

// TestLunarRoundTrip walks every day of the supported Gregorian range of
// one lunar cycle's worth of years: LunarOf then Solar gives the day back.
func TestLunarRoundTrip(t *testing.T) {
	t.Parallel()
	d := Date{2024, 1, 1}
	for d.Year < 2028 {
		l := LunarOf(d)
		back, ok := l.Solar()
		require.True(t, ok, "%s → %+v", d, l)
		require.Equal(t, d, back)
		d = d.AddDays(1)
	}
}
