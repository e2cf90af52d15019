package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLoadLocationCaches: a zone is read from the zone data once and then
// handed out from the cache; a bad name fails with time.LoadLocation's own
// error every time and is not kept (the API's ?tz= must not grow the cache).
func TestLoadLocationCaches(t *testing.T) {
	t.Parallel()
	a, err := LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	b, err := LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	require.Same(t, a, b, "the second load is the cached location")
	require.Equal(t, "Europe/Berlin", a.String())
	z, err := LoadZone("Europe/Berlin")
	require.NoError(t, err)
	require.Same(t, a, z, "LoadZone goes through the same cache")
	require.Same(t, a, ZoneLocation("Europe/Berlin"), "and ZoneLocation")

	for range 2 {
		_, err := LoadLocation("Europe/Berln")
		_, want := time.LoadLocation("Europe/Berln")
		require.EqualError(t, err, want.Error())
		_, cached := zones.Load("Europe/Berln")
		require.False(t, cached, "a bad name is not cached")
	}
	utc, err := LoadLocation("")
	require.NoError(t, err)
	require.Same(t, time.UTC, utc)
}

// TestLoadZoneErrors: a display zone's error names the zone and says
// what a good name looks like, as before the cache.
func TestLoadZoneErrors(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "Local"} {
		loc, err := LoadZone(name)
		require.NoError(t, err, name)
		require.Same(t, time.Local, loc, "%q is the machine's zone", name)
	}
	_, err := LoadZone("Asia/Shangai")
	require.EqualError(t, err, `time zone "Asia/Shangai": unknown time zone Asia/Shangai (want an IANA name such as Asia/Shanghai, or UTC)`)
	_, err = LoadZone("Asia/Shangai")
	require.ErrorContains(t, err, "want an IANA name", "an error is not cached as a zone")
}

// TestZoneLocationAndSlotDate: a zone kept in the state that does not
// load (or is empty) counts as UTC.
func TestZoneLocationAndSlotDate(t *testing.T) {
	t.Parallel()
	require.Same(t, time.UTC, ZoneLocation(""))
	require.Same(t, time.UTC, ZoneLocation("Mars/Olympus"))
	slot := time.Date(2026, 11, 30, 17, 30, 0, 0, time.UTC) // 01:30 on Dec 1 in Shanghai
	require.Equal(t, "2026-12-01", SlotDate(slot, "Asia/Shanghai"))
	require.Equal(t, "2026-11-30", SlotDate(slot, ""))
	require.Equal(t, "2026-11-30", SlotDate(slot, "Mars/Olympus"))
}
