package schedule

import (
	"errors"
	"testing"
	"time"
)

// FuzzCron feeds New cron texts and zones as a rule file could carry them.
// Properties: no panic; a refusal is one of the package's errors; an
// accepted schedule's slots are strictly after the given time, ascending,
// within Horizon, and land on a whole second.
func FuzzCron(f *testing.F) {
	for _, s := range []struct {
		cron, zone string
		after      int64
	}{
		{"0 9 * * *", "Asia/Shanghai", 1767225600},
		{"*/15 * * * * *", "", 1700000000},
		{"0 0 29 2 *", "UTC", 1767225600},
		{"30 2 * * 0", "America/New_York", 1772956800},
		{"@every 90s", "", 0},
		{"@hourly", "Europe/London", 1774746000},
		{"0 0 31 4 *", "", 1767225600},
		{"1-5/2 9-17 ? * MON-FRI", "Asia/Tokyo", 1767225600},
		{"@every 0s", "", 0},
		{"* * * * * * *", "Local", 0},
		{"60 * * * *", "Nowhere/City", 0},
	} {
		f.Add(s.cron, s.zone, s.after)
	}
	f.Fuzz(func(t *testing.T, cron, zone string, after int64) {
		if len(cron) > 256 || len(zone) > 64 {
			t.Skip()
		}
		s, err := New(Spec{Cron: cron, Timezone: zone}, nil)
		if err == nil && s.Spec().Cron != cron {
			t.Fatalf("Spec().Cron = %q, want %q", s.Spec().Cron, cron)
		}
		if err != nil {
			if !errors.Is(err, ErrBadCron) && !errors.Is(err, ErrUnknownZone) && !errors.Is(err, ErrBadShift) {
				t.Fatalf("New(%q, %q): error %v is none of the package's errors", cron, zone, err)
			}
			return
		}
		// Years 1970-2200: the span a node's clock can show.
		const lo, hi = 0, 7258118400
		at := time.Unix(lo+(after%(hi-lo)+(hi-lo))%(hi-lo), 0).UTC()
		prev := at
		for i := 0; i < 3; i++ {
			next, ok := s.Next(prev)
			if !ok {
				return
			}
			if !next.After(prev) {
				t.Fatalf("%q in %q: Next(%v) = %v, not after it", cron, zone, prev, next)
			}
			if next.Sub(prev) > Horizon+48*time.Hour {
				t.Fatalf("%q in %q: Next(%v) = %v, beyond the horizon", cron, zone, prev, next)
			}
			if next.Nanosecond() != 0 {
				t.Fatalf("%q in %q: Next(%v) = %v, not on a whole second", cron, zone, prev, next)
			}
			prev = next
		}
	})
}
