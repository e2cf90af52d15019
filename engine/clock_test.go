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
