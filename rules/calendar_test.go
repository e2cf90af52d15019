package rules

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/calendar"
)

const acmeRule = `return rule {
  name = "acme_report", schedule = "0 9 * * *", timezone = "Asia/Shanghai", calendar = "acme",
  channel = "mock",
  recipients = function(run) return { "alice" } end,
  message = function(run, to) return { content = tostring(calendar.is_workday(run.date)) } end,
}
`

// TestCompanyCalendar: a calendar file in the rules directory is
// registered in the shared registry, follows edits, keeps its last good
// version when broken, and leaves the registry when deleted.
func TestCompanyCalendar(t *testing.T) {
	t.Parallel()
	reg := calendar.NewRegistry()
	dir := newDir(t, map[string]string{
		"calendars/acme.yaml": "base: cn_workday\nholidays: [2026-12-24]\n",
		"acme.lua":            acmeRule,
	})
	s := load(t, dir, func(c *Config) { c.Calendars = reg })
	require.Same(t, reg, s.Calendars())
	st, _ := statusOf(s, "calendars/acme.yaml")
	require.Equal(t, FileStatus{Kind: KindCalendar, Name: "acme", File: "calendars/acme.yaml", Hash: st.Hash}, st)
	cal, err := reg.Lookup("acme")
	require.NoError(t, err)
	require.False(t, cal.IsWorkday(date(t, "2026-12-24")))

	ctx := context.Background()
	res, err := s.Preview(ctx, "acme_report", mustTime(t, "2026-12-24T09:00:00+08:00"), nil)
	require.NoError(t, err)
	require.False(t, res.IsSlot)
	require.Contains(t, res.Reason, "not a workday in calendar acme")

	// Edit: the holiday moves; the registry (read by the engine's
	// schedules) follows.
	writeFiles(t, dir, map[string]string{"calendars/acme.yaml": "base: cn_workday\nholidays: [2026-12-25]\n"})
	_, err = s.Reload()
	require.NoError(t, err)
	cal, _ = reg.Lookup("acme")
	require.True(t, cal.IsWorkday(date(t, "2026-12-24")))
	require.False(t, cal.IsWorkday(date(t, "2026-12-25")))
	res, err = s.Preview(ctx, "acme_report", mustTime(t, "2026-12-24T09:00:00+08:00"), nil)
	require.NoError(t, err)
	require.True(t, res.IsSlot)

	// Broken: the last good calendar stays.
	writeFiles(t, dir, map[string]string{"calendars/acme.yaml": "base: cn_workday\nholiday: [2026-12-26]\n"})
	_, err = s.Reload()
	require.NoError(t, err)
	st, _ = statusOf(s, "calendars/acme.yaml")
	require.Equal(t, 2, st.Line)
	require.Contains(t, st.Error, "unknown field")
	cal, _ = reg.Lookup("acme")
	require.False(t, cal.IsWorkday(date(t, "2026-12-25")))

	// Deleted: gone from the registry; the rule that names it keeps its
	// last good version and reports why.
	require.NoError(t, os.Remove(filepath.Join(dir, "calendars", "acme.yaml")))
	_, err = s.Reload()
	require.NoError(t, err)
	_, err = reg.Lookup("acme")
	require.ErrorIs(t, err, calendar.ErrUnknownCalendar)
	st, _ = statusOf(s, "acme.lua")
	require.Contains(t, st.Error, "unknown calendar")
	require.NotEmpty(t, st.Hash)
	require.NotNil(t, s.Schedule("acme_report"))
}
