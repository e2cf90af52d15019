package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestQuietHoursInThePersonsZone(t *testing.T) {
	t.Parallel()
	q := QuietHours{From: 22 * time.Hour, To: 8 * time.Hour}
	r := Rule{Name: "r", Deadline: 24 * time.Hour}
	base := time.Date(2026, 12, 1, 22, 30, 0, 0, time.UTC) // 06:30 in Shanghai, 23:30 in Berlin, 17:30 in New York
	for _, tc := range []struct {
		zone string
		want time.Time
	}{
		{"Asia/Shanghai", time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}, // 08:00 CST
		{"Europe/Berlin", time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)}, // 08:00 CET
		{"America/New_York", base},                                      // not quiet
	} {
		got := r.Timing("k", base, Planned{Recipient: "p", Zone: tc.zone, Quiet: q}, 0, 1, "UTC")
		require.Equal(t, tc.want, got.NotBefore.UTC(), tc.zone)
		require.Equal(t, tc.want != base, got.Deferred != "", tc.zone)
	}
	// A window inside one day, and a DST change inside a night: 08:00 is
	// 08:00 local on the morning after the clocks went back.
	lunch := QuietHours{From: 12 * time.Hour, To: 14 * time.Hour}
	ber := mustZone(t, "Europe/Berlin")
	got, held := lunch.Release(time.Date(2026, 12, 1, 13, 0, 0, 0, ber), ber)
	require.True(t, held)
	require.Equal(t, time.Date(2026, 12, 1, 14, 0, 0, 0, ber), got)
	got, held = q.Release(time.Date(2026, 10, 24, 23, 0, 0, 0, ber), ber)
	require.True(t, held)
	require.Equal(t, "2026-10-25 08:00 CET", got.Format("2006-01-02 15:04 MST"))
	_, held = q.Release(time.Date(2026, 10, 25, 8, 0, 0, 0, ber), ber)
	require.False(t, held, "the window's end is outside it")
}

func TestParseQuietRange(t *testing.T) {
	t.Parallel()
	q, err := ParseQuietRange("22:00-08:00")
	require.NoError(t, err)
	require.Equal(t, "22:00–08:00", q.String())
	q, err = ParseQuietRange("off")
	require.NoError(t, err)
	require.True(t, q.IsZero())
	for _, bad := range []string{"22:00", "22-08", "25:00-08:00", "08:00-08:00", ""} {
		_, err := ParseQuietRange(bad)
		require.Error(t, err, bad)
	}
}

func TestDigestRelease(t *testing.T) {
	t.Parallel()
	nine := time.Date(2026, 12, 1, 9, 0, 0, 0, mustZone(t, "Asia/Shanghai"))
	for _, off := range []time.Duration{0, time.Second, 9*time.Minute + 59*time.Second} {
		require.True(t, DigestRelease(nine.Add(off), 10*time.Minute).Equal(nine.Add(10*time.Minute)), fmt.Sprint(off))
	}
	require.True(t, DigestRelease(nine.Add(10*time.Minute), 10*time.Minute).Equal(nine.Add(20*time.Minute)))
	require.True(t, DigestRelease(nine, 0).Equal(nine))
}

func mustZone(t *testing.T, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}
