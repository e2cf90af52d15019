package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/calendar"
)

func TestNewErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		spec Spec
		err  error
		want []string // substrings of the message
	}{
		{"empty cron", Spec{}, ErrBadCron, []string{"empty", "5 fields"}},
		{"minute", Spec{Cron: "61 * * * *"}, ErrBadCron, []string{`minute field "61"`, "above maximum"}},
		{"hour", Spec{Cron: "0 24 * * *"}, ErrBadCron, []string{`hour field "24"`}},
		{"dom", Spec{Cron: "0 9 32 * *"}, ErrBadCron, []string{`day-of-month field "32"`}},
		{"month", Spec{Cron: "0 9 * 13 *"}, ErrBadCron, []string{`month field "13"`}},
		{"dow", Spec{Cron: "0 9 * * 8"}, ErrBadCron, []string{`day-of-week field "8"`}},
		{"dow name", Spec{Cron: "0 9 * * MONDAY"}, ErrBadCron, []string{`day-of-week field "MONDAY"`}},
		{"second", Spec{Cron: "60 0 9 * * *"}, ErrBadCron, []string{`second field "60"`}},
		{"6-field minute", Spec{Cron: "0 x 9 * * *"}, ErrBadCron, []string{`minute field "x"`}},
		{"step", Spec{Cron: "*/0 * * * *"}, ErrBadCron, []string{`minute field "*/0"`}},
		{"too few", Spec{Cron: "0 9 * *"}, ErrBadCron, []string{"4 fields", "want 5 fields"}},
		{"too many", Spec{Cron: "0 0 9 * * * 2026"}, ErrBadCron, []string{"7 fields"}},
		{"descriptor", Spec{Cron: "@fortnightly"}, ErrBadCron, []string{"unknown descriptor", "@every <duration>"}},
		{"every junk", Spec{Cron: "@every soon"}, ErrBadCron, []string{"@every", "like 30s"}},
		{"every empty", Spec{Cron: "@every"}, ErrBadCron, []string{"@every"}},
		{"every zero", Spec{Cron: "@every 0s"}, ErrBadCron, []string{"at least 1s"}},
		{"every negative", Spec{Cron: "@every -5m"}, ErrBadCron, []string{"at least 1s"}},
		{"every fraction", Spec{Cron: "@every 1500ms"}, ErrBadCron, []string{"whole number of seconds"}},
		{"zone prefix", Spec{Cron: "TZ=UTC"}, ErrBadCron, []string{"timezone"}},
		{"cron_tz prefix", Spec{Cron: "CRON_TZ=Asia/Shanghai 0 9 * * *"}, ErrBadCron, []string{"timezone"}},
		{"zone", Spec{Cron: "@daily", Timezone: "Mars/Olympus_Mons"}, ErrUnknownZone, []string{`"Mars/Olympus_Mons"`, "IANA"}},
		{"local zone", Spec{Cron: "@daily", Timezone: "Local"}, ErrUnknownZone, []string{"depends on the machine"}},
		{"calendar", Spec{Cron: "@daily", Calendar: "cn_holiday"}, ErrUnknownCalendar, []string{`"cn_holiday"`, "cn_workday"}},
		{"shift", Spec{Cron: "@daily", Calendar: "weekday", Shift: "tomorrow"}, ErrBadShift, []string{`"tomorrow"`, "next_workday"}},
		{"shift without calendar", Spec{Cron: "@daily", Shift: "next_workday"}, ErrBadShift, []string{"needs a calendar"}},
		{"shift with every", Spec{Cron: "@every 1h", Calendar: "weekday", Shift: "next_workday"}, ErrBadShift, []string{"not tied to a time of day"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(c.spec, calendar.NewRegistry())
			require.ErrorIs(t, err, c.err)
			for _, w := range c.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
	require.True(t, errors.Is(ErrUnknownCalendar, calendar.ErrUnknownCalendar))
	_, err := New(Spec{Cron: "@daily", Calendar: "weekday"}, nil)
	require.ErrorIs(t, err, ErrUnknownCalendar)
}

func TestNewAccepts(t *testing.T) {
	t.Parallel()
	for _, spec := range []Spec{
		{Cron: " 0 9 * * * "},
		{Cron: "0 9 * * 1-5", Timezone: "UTC"},
		{Cron: "0 0 9 ? * MON-FRI", Timezone: "Europe/Berlin"},
		{Cron: "@every 1h30m", Calendar: "weekday", Shift: "skip"},
		{Cron: "@weekly", Calendar: "every_day", Shift: "next_workday"},
	} {
		_, err := New(spec, calendar.NewRegistry())
		require.NoError(t, err, "%+v", spec)
	}
}

// FuzzNew: no spec makes New or Next panic, and every slot is after its
// argument, in the schedule's zone.
func FuzzNew(f *testing.F) {
	for _, s := range []string{"0 9 * * *", "*/15 * * * *", "@every 30s", "TZ=UTC", "CRON_TZ=", "@every", "0 0 30 2 *",
		"1-5/2,7 */3 1,15 * MON-FRI", "* * * * * *", "@weekly", "0-59/0 * * * *", "5-1 * * * *"} {
		f.Add(s, "America/New_York", "cn_workday", "next_workday")
		f.Add(s, "", "", "")
	}
	reg := calendar.NewRegistry()
	after := time.Date(2026, 3, 7, 23, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, cron, zone, cal, shift string) {
		s, err := New(Spec{Cron: cron, Timezone: zone, Calendar: cal, Shift: shift}, reg)
		if err != nil {
			return
		}
		for _, x := range s.NextN(after, 3) {
			require.True(t, x.After(after))
			require.Equal(t, s.Location(), x.Location())
			after = x
		}
	})
}
