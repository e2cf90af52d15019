package calendar

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func mustDate(t testing.TB, s string) Date {
	t.Helper()
	d, err := ParseDate(s)
	require.NoError(t, err)
	return d
}

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func TestParseDate(t *testing.T) {
	t.Parallel()
	d, err := ParseDate("2026-12-01")
	require.NoError(t, err)
	require.Equal(t, Date{2026, time.December, 1}, d)
	require.Equal(t, "2026-12-01", d.String())

	for _, bad := range []string{"", "2026-02-30", "2026-13-01", "26-12-01", "2026/12/01", "2026-12-01T00:00:00Z", " 2026-12-01"} {
		_, err := ParseDate(bad)
		require.ErrorIs(t, err, ErrBadDate, bad)
		require.Contains(t, err.Error(), "YYYY-MM-DD")
	}
}

func TestDateArithmetic(t *testing.T) {
	t.Parallel()
	d := mustDate(t, "2028-02-28")
	require.Equal(t, mustDate(t, "2028-02-29"), d.AddDays(1))
	require.Equal(t, mustDate(t, "2028-03-01"), d.AddDays(2))
	require.Equal(t, mustDate(t, "2027-12-31"), mustDate(t, "2028-01-01").AddDays(-1))
	require.Equal(t, time.Sunday, mustDate(t, "2026-01-04").Weekday())
	require.True(t, d.Before(d.AddDays(1)))
	require.True(t, d.AddDays(1).After(d))
	require.Equal(t, 0, d.Compare(d))
	require.Equal(t, -1, mustDate(t, "2026-12-31").Compare(mustDate(t, "2027-01-01")))
	require.True(t, Date{}.IsZero())
	require.False(t, d.IsZero())

	sh := mustZone(t, "Asia/Shanghai")
	// 2026-12-31 20:00 UTC is already 2027-01-01 in Shanghai.
	require.Equal(t, mustDate(t, "2027-01-01"), DateOf(time.Date(2026, 12, 31, 20, 0, 0, 0, time.UTC).In(sh)))
}

// TestDateInDST pins the DST policy: a gap time becomes the first instant
// after the gap; a repeated time is its first occurrence. The zones cover
// both hemispheres, negative and positive offsets, and a 30-minute shift.
func TestDateInDST(t *testing.T) {
	t.Parallel()
	cases := []struct {
		zone, date string
		h, m       int
		want       string // RFC 3339
	}{
		{"America/New_York", "2026-03-08", 2, 30, "2026-03-08T03:00:00-04:00"}, // gap
		{"America/New_York", "2026-03-08", 2, 0, "2026-03-08T03:00:00-04:00"},
		{"America/New_York", "2026-03-08", 1, 59, "2026-03-08T01:59:00-05:00"},
		{"America/New_York", "2026-03-08", 3, 0, "2026-03-08T03:00:00-04:00"},
		{"America/New_York", "2027-03-14", 2, 30, "2027-03-14T03:00:00-04:00"},
		{"America/New_York", "2026-11-01", 1, 30, "2026-11-01T01:30:00-04:00"}, // repeat: first
		{"America/New_York", "2026-11-01", 1, 0, "2026-11-01T01:00:00-04:00"},
		{"America/New_York", "2026-11-01", 2, 0, "2026-11-01T02:00:00-05:00"},
		{"Europe/Berlin", "2026-03-29", 2, 30, "2026-03-29T03:00:00+02:00"},
		{"Europe/Berlin", "2026-10-25", 2, 30, "2026-10-25T02:30:00+02:00"},
		{"Australia/Sydney", "2026-10-04", 2, 15, "2026-10-04T03:00:00+11:00"},
		{"Australia/Sydney", "2026-04-05", 2, 30, "2026-04-05T02:30:00+11:00"},
		{"Australia/Lord_Howe", "2026-10-04", 2, 15, "2026-10-04T02:30:00+11:00"},
		{"Australia/Lord_Howe", "2026-04-05", 1, 45, "2026-04-05T01:45:00+11:00"},
		{"America/Santiago", "2026-09-06", 0, 0, "2026-09-06T01:00:00-03:00"},   // gap at midnight
		{"America/Santiago", "2026-04-04", 23, 30, "2026-04-04T23:30:00-03:00"}, // repeat before midnight
		{"Asia/Shanghai", "2026-10-01", 9, 0, "2026-10-01T09:00:00+08:00"},
		{"UTC", "2026-10-01", 9, 0, "2026-10-01T09:00:00Z"},
	}
	for _, c := range cases {
		got := mustDate(t, c.date).In(mustZone(t, c.zone), c.h, c.m, 0)
		want, err := time.Parse(time.RFC3339, c.want)
		require.NoError(t, err)
		require.True(t, want.Equal(got), "%s %s %02d:%02d: got %s want %s", c.zone, c.date, c.h, c.m, got, want)
		require.Equal(t, c.zone, got.Location().String())
	}
	require.Equal(t, time.UTC, mustDate(t, "2026-01-01").In(nil, 0, 0, 0).Location())
}
