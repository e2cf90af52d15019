package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A slot fires once whoever fires it first: the scheduler's StartRun and a
// manual fire of the same slot name the same run, in every zone.
func TestManualAndScheduledRunsOfASlotAreOneRun(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 11, 30, 16, 30, 0, 0, time.UTC) // 00:30 on Dec 1 in Shanghai
	now := slot.Add(2 * time.Hour)
	for _, r := range []Rule{
		{Name: "daily", Timezone: "Asia/Shanghai"},
		{Name: "local", Timezone: "UTC", PerRecipient: true, Zones: []string{"Asia/Shanghai", "Europe/Berlin"}},
	} {
		for _, z := range r.FireZones() {
			sched := ScheduledRun(r, z, slot, "h", now, time.Minute, time.Hour)
			manual := ManualRun(r, z, slot, "h", now)
			require.Equal(t, sched.Key, manual.Key, r.Name)
			require.Equal(t, sched.Date, manual.Date, r.Name)
			require.True(t, manual.Manual)
			require.False(t, sched.Manual)
			require.True(t, sched.Late && sched.Skip, "two hours late, one hour of catch-up")
		}
	}
	require.Equal(t, RunKey("daily", slot), ManualRun(Rule{Name: "daily"}, "", slot, "", now).Key)
	require.Equal(t, ZoneRunKey("local", "Europe/Berlin", slot), ManualRun(Rule{Name: "local", PerRecipient: true}, "Europe/Berlin", slot, "", now).Key)
	require.Equal(t, "2026-12-01", ManualRun(Rule{Name: "daily", Timezone: "Asia/Shanghai"}, "Asia/Shanghai", slot, "", now).Date)
}
