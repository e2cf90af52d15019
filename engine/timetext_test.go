package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseTimeAcceptsLocalForm(t *testing.T) {
	t.Parallel()
	sh, err := LoadZone("Asia/Shanghai")
	require.NoError(t, err)
	want := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, s := range []string{"2026-12-01 18:00", "2026-12-01 18:00:00", "2026-12-01T18:00:00+08:00", "2026-12-01T10:00:00Z"} {
		got, err := ParseTime(s, sh)
		require.NoError(t, err, s)
		require.True(t, want.Equal(got), "%s → %s", s, got)
	}
	_, err = ParseTime("2026-12-01T18:00:00", sh)
	require.Error(t, err, "RFC 3339 without its offset")
	_, err = ParseTime("tomorrow", sh)
	require.ErrorContains(t, err, "RFC 3339")
	_, err = LoadZone("Asia/Shangai")
	require.ErrorContains(t, err, "IANA")
}

func TestShowAndLocalize(t *testing.T) {
	t.Parallel()
	sh, err := LoadZone("Asia/Shanghai")
	require.NoError(t, err)
	at := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	require.Equal(t, "2026-12-01 09:00:00 +08:00", ShowTime(at, sh))
	require.Equal(t, "-", ShowTime(time.Time{}, sh))
	require.Equal(t, "slot 2026-12-01 09:00:00 +08:00 of rule r was skipped; deadline 2026-12-01 11:00:00 +08:00",
		LocalizeText("slot 2026-12-01T01:00:00Z of rule r was skipped; deadline 2026-12-01T11:00:00+08:00", sh))
}

// TestParseTimeRefusesWallClocksAcrossDST: a local time the clocks skip,
// or one they show twice, names no single instant; it is refused with the
// instants meant, never silently shifted or guessed.
func TestParseTimeRefusesWallClocksAcrossDST(t *testing.T) {
	t.Parallel()
	ny, err := LoadZone("America/New_York")
	require.NoError(t, err)
	_, err = ParseTime("2026-03-08 02:30", ny)
	require.ErrorIs(t, err, ErrWallClock)
	require.ErrorContains(t, err, `"2026-03-08 02:30" does not exist in America/New_York`)
	_, err = ParseTime("2026-11-01 01:30", ny)
	require.ErrorIs(t, err, ErrWallClock)
	require.ErrorContains(t, err, "2026-11-01T01:30:00-04:00 or 2026-11-01T01:30:00-05:00")
	// Either, given with its offset, is that instant.
	got, err := ParseTime("2026-11-01T01:30:00-05:00", ny)
	require.NoError(t, err)
	require.True(t, got.Equal(time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC)))
	// Next to the changes, and in a zone without them, a wall clock is one instant.
	for s, want := range map[string]time.Time{
		"2026-03-08 01:59": time.Date(2026, 3, 8, 6, 59, 0, 0, time.UTC),
		"2026-03-08 03:00": time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC),
		"2026-11-01 00:59": time.Date(2026, 11, 1, 4, 59, 0, 0, time.UTC),
		"2026-11-01 02:00": time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC),
	} {
		got, err := ParseTime(s, ny)
		require.NoError(t, err, s)
		require.True(t, want.Equal(got), "%s → %s", s, got)
	}
	sh, err := LoadZone("Asia/Shanghai")
	require.NoError(t, err)
	got, err = ParseTime("2026-11-01 01:30", sh)
	require.NoError(t, err)
	require.True(t, got.Equal(time.Date(2026, 10, 31, 17, 30, 0, 0, time.UTC)))
}

// TestLocalizeTextKeepsRunKeys: a run key holds its slot in RFC 3339
// after an "@"; it is a name to copy (deliveries retry --run KEY), not a
// time to read, and stays as it is.
func TestLocalizeTextKeepsRunKeys(t *testing.T) {
	t.Parallel()
	sh, err := LoadZone("Asia/Shanghai")
	require.NoError(t, err)
	require.Equal(t,
		"daily_report to lina (run daily_report@2026-11-30T01:00:00Z) failed at 2026-11-30 09:05:00 +08:00; "+
			"run daily_report@2026-12-01T01:00:00Z@Asia/Shanghai is late",
		LocalizeText("daily_report to lina (run daily_report@2026-11-30T01:00:00Z) failed at 2026-11-30T01:05:00Z; "+
			"run daily_report@2026-12-01T01:00:00Z@Asia/Shanghai is late", sh))
	require.Equal(t, "2026-12-01 09:00:00 +08:00 and (2026-12-01 09:00:00 +08:00)",
		LocalizeText("2026-12-01T01:00:00Z and (2026-12-01T01:00:00Z)", sh), "at the start and after other punctuation")
}
