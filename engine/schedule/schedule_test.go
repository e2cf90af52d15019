package schedule

import (
	"sync"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/calendar"
)

func mustNew(t testing.TB, spec Spec) *Schedule {
	t.Helper()
	s, err := New(spec, calendar.NewRegistry())
	require.NoError(t, err)
	return s
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return v
}

func fmtAll(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Format(time.RFC3339Nano + " MST")
	}
	return out
}

// slotsUntil lists the slots after from, up to and including until.
func slotsUntil(s *Schedule, from, until time.Time) []string {
	var out []string
	for {
		t, ok := s.Next(from)
		if !ok || t.After(until) {
			return out
		}
		out = append(out, t.Format(time.RFC3339))
		from = t
	}
}

// TestDST pins the slots of America/New_York's 2026 transitions: spring
// forward on 2026-03-08 (02:00 EST → 03:00 EDT) and fall back on 2026-11-01
// (02:00 EDT → 01:00 EST).
func TestDST(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, cron, from, until string
		want                    []string
	}{
		{"spring 02:30 daily", "30 2 * * *", "2026-03-06T12:00:00-05:00", "2026-03-10T12:00:00-04:00", []string{
			"2026-03-07T02:30:00-05:00",
			"2026-03-08T03:00:00-04:00", // 02:30 does not exist: fires once at the end of the gap
			"2026-03-09T02:30:00-04:00",
			"2026-03-10T02:30:00-04:00",
		}},
		{"spring hourly", "0 * * * *", "2026-03-07T23:30:00-05:00", "2026-03-08T04:30:00-04:00", []string{
			"2026-03-08T00:00:00-05:00",
			"2026-03-08T01:00:00-05:00",
			"2026-03-08T03:00:00-04:00", // 02:00 and 03:00 are one instant, fired once
			"2026-03-08T04:00:00-04:00",
		}},
		{"spring quarter-hourly", "*/15 * * * *", "2026-03-08T01:10:00-05:00", "2026-03-08T03:40:00-04:00", []string{
			"2026-03-08T01:15:00-05:00",
			"2026-03-08T01:30:00-05:00",
			"2026-03-08T01:45:00-05:00",
			"2026-03-08T03:00:00-04:00", // 02:00, 02:15, 02:30, 02:45 and 03:00: once
			"2026-03-08T03:15:00-04:00",
			"2026-03-08T03:30:00-04:00",
		}},
		{"spring 2027", "30 2 * * *", "2027-03-13T12:00:00-05:00", "2027-03-14T12:00:00-04:00", []string{
			"2027-03-14T03:00:00-04:00",
		}},
		{"autumn 02:30 daily", "30 2 * * *", "2026-10-30T12:00:00-04:00", "2026-11-02T12:00:00-05:00", []string{
			"2026-10-31T02:30:00-04:00",
			"2026-11-01T02:30:00-05:00",
			"2026-11-02T02:30:00-05:00",
		}},
		{"autumn 01:30 daily", "30 1 * * *", "2026-10-31T12:00:00-04:00", "2026-11-02T12:00:00-05:00", []string{
			"2026-11-01T01:30:00-04:00", // first occurrence only; not 01:30 EST
			"2026-11-02T01:30:00-05:00",
		}},
		{"autumn hourly", "0 * * * *", "2026-10-31T23:30:00-04:00", "2026-11-01T03:30:00-05:00", []string{
			"2026-11-01T00:00:00-04:00",
			"2026-11-01T01:00:00-04:00",
			"2026-11-01T02:00:00-05:00", // no second 01:00
			"2026-11-01T03:00:00-05:00",
		}},
		{"autumn quarter-hourly", "*/15 * * * *", "2026-11-01T00:50:00-04:00", "2026-11-01T02:20:00-05:00", []string{
			"2026-11-01T01:00:00-04:00",
			"2026-11-01T01:15:00-04:00",
			"2026-11-01T01:30:00-04:00",
			"2026-11-01T01:45:00-04:00",
			"2026-11-01T02:00:00-05:00",
			"2026-11-01T02:15:00-05:00",
		}},
		{"autumn from inside the repeat", "*/15 * * * *", "2026-11-01T01:20:00-05:00", "2026-11-01T02:20:00-05:00", []string{
			"2026-11-01T02:00:00-05:00", // 01:30 and 01:45 EST were fired as EDT
			"2026-11-01T02:15:00-05:00",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := mustNew(t, Spec{Cron: c.cron, Timezone: "America/New_York"})
			require.Equal(t, c.want, slotsUntil(s, mustTime(t, c.from), mustTime(t, c.until)))
		})
	}
}

// TestCNWorkday uses lunar-go's 2026 data: 2026-09-20 (Sunday) is a make-up
// workday for 国庆, 2026-09-25..27 is 中秋, 2026-10-01..07 is 国庆 with
// Monday 10-05 inside, and 2026-10-10 (Saturday) is a make-up workday.
func TestCNWorkday(t *testing.T) {
	t.Parallel()
	const sh = "+08:00"
	cases := []struct {
		name  string
		spec  Spec
		from  string
		until string
		want  []string
	}{
		{"daily skip", Spec{Cron: "0 9 * * *", Timezone: "Asia/Shanghai", Calendar: "cn_workday"},
			"2026-09-18T00:00:00" + sh, "2026-10-12T23:00:00" + sh, []string{
				"2026-09-18T09:00:00" + sh,
				"2026-09-20T09:00:00" + sh, // Sunday, make-up workday: fires
				"2026-09-21T09:00:00" + sh,
				"2026-09-22T09:00:00" + sh,
				"2026-09-23T09:00:00" + sh,
				"2026-09-24T09:00:00" + sh,
				"2026-09-28T09:00:00" + sh,
				"2026-09-29T09:00:00" + sh,
				"2026-09-30T09:00:00" + sh,
				"2026-10-08T09:00:00" + sh,
				"2026-10-09T09:00:00" + sh,
				"2026-10-10T09:00:00" + sh, // Saturday, make-up workday
				"2026-10-12T09:00:00" + sh,
			}},
		{"weekday calendar ignores 调休", Spec{Cron: "0 9 * * *", Timezone: "Asia/Shanghai", Calendar: "weekday"},
			"2026-09-18T00:00:00" + sh, "2026-09-22T23:00:00" + sh, []string{
				"2026-09-18T09:00:00" + sh,
				"2026-09-21T09:00:00" + sh,
				"2026-09-22T09:00:00" + sh,
			}},
		{"Monday holiday skipped", Spec{Cron: "0 9 * * 1", Timezone: "Asia/Shanghai", Calendar: "cn_workday"},
			"2026-09-27T00:00:00" + sh, "2026-10-13T00:00:00" + sh, []string{
				"2026-09-28T09:00:00" + sh,
				"2026-10-12T09:00:00" + sh, // 10-05 is 国庆: dropped
			}},
		{"Monday holiday to Tuesday", Spec{Cron: "0 9 * * MON", Timezone: "Asia/Shanghai", Calendar: "cn_workday", Shift: "next_workday"},
			"2026-03-31T00:00:00" + sh, "2026-04-14T00:00:00" + sh, []string{
				"2026-04-07T09:00:00" + sh, // 04-06 is 清明: moved to Tuesday, once
				"2026-04-13T09:00:00" + sh,
			}},
		{"Monday in 国庆 to Thursday", Spec{Cron: "0 9 * * 1", Timezone: "Asia/Shanghai", Calendar: "cn_workday", Shift: "next_workday"},
			"2026-09-27T00:00:00" + sh, "2026-10-13T00:00:00" + sh, []string{
				"2026-09-28T09:00:00" + sh,
				"2026-10-08T09:00:00" + sh,
				"2026-10-12T09:00:00" + sh,
			}},
		{"daily shifted fires once", Spec{Cron: "0 9 * * *", Timezone: "Asia/Shanghai", Calendar: "cn_workday", Shift: "next_workday"},
			"2026-09-29T10:00:00" + sh, "2026-10-12T23:00:00" + sh, []string{
				"2026-09-30T09:00:00" + sh,
				"2026-10-08T09:00:00" + sh, // 10-01..07 all land here: once
				"2026-10-09T09:00:00" + sh,
				"2026-10-10T09:00:00" + sh,
				"2026-10-12T09:00:00" + sh, // Sunday 10-11 lands on Monday: once
			}},
		{"shifted slot found from inside the target day", Spec{Cron: "0 9 * * 1", Timezone: "Asia/Shanghai", Calendar: "cn_workday", Shift: "next_workday"},
			"2026-04-07T08:00:00" + sh, "2026-04-13T09:00:00" + sh, []string{
				"2026-04-07T09:00:00" + sh,
				"2026-04-13T09:00:00" + sh,
			}},
		{"shift from a long run of days off", Spec{Cron: "0 9 * * *", Timezone: "Asia/Shanghai", Calendar: "cn_workday", Shift: "next_workday"},
			"2026-10-08T08:59:59" + sh, "2026-10-08T23:00:00" + sh, []string{
				"2026-10-08T09:00:00" + sh,
			}},
		{"@every skips holidays", Spec{Cron: "@every 6h", Timezone: "Asia/Shanghai", Calendar: "cn_workday"},
			"2026-09-30T12:00:00" + sh, "2026-10-08T09:00:00" + sh, []string{
				"2026-09-30T14:00:00" + sh, // multiples of 6h since the epoch: 02, 08, 14, 20 in Shanghai
				"2026-09-30T20:00:00" + sh,
				"2026-10-08T02:00:00" + sh,
				"2026-10-08T08:00:00" + sh,
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := mustNew(t, c.spec)
			require.Equal(t, c.want, slotsUntil(s, mustTime(t, c.from), mustTime(t, c.until)))
		})
	}
}

func TestCompanyCalendar(t *testing.T) {
	t.Parallel()
	reg := calendar.NewRegistry()
	acme, err := calendar.ParseFile("acme", []byte("base: cn_workday\nholidays: [2026-12-24]\nworkdays: [2026-12-27]\n"))
	require.NoError(t, err)
	require.NoError(t, reg.Register("acme", acme))
	s, err := New(Spec{Cron: "0 9 * * *", Timezone: "Asia/Shanghai", Calendar: "acme"}, reg)
	require.NoError(t, err)
	from := mustTime(t, "2026-12-23T10:00:00+08:00")
	until := mustTime(t, "2026-12-28T10:00:00+08:00")
	require.Equal(t, []string{
		"2026-12-25T09:00:00+08:00",
		"2026-12-27T09:00:00+08:00", // company workday, a Sunday
		"2026-12-28T09:00:00+08:00",
	}, slotsUntil(s, from, until))

	// The file is edited and reloaded: the same schedule sees it.
	edited, err := calendar.ParseFile("acme", []byte("base: cn_workday\nholidays: [2026-12-25]\n"))
	require.NoError(t, err)
	require.NoError(t, reg.Set("acme", edited))
	require.Equal(t, []string{
		"2026-12-24T09:00:00+08:00",
		"2026-12-28T09:00:00+08:00",
	}, slotsUntil(s, from, until))

	// Removed: the last good calendar stays in force.
	require.True(t, reg.Remove("acme"))
	require.Len(t, slotsUntil(s, from, until), 3)
}

func TestLeapDay(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{"", "Asia/Shanghai"} {
		s := mustNew(t, Spec{Cron: "0 9 29 2 *", Timezone: zone})
		got := s.NextN(mustTime(t, "2026-03-01T00:00:00Z"), 2)
		require.Len(t, got, 2)
		require.Equal(t, "2028-02-29 09:00:00", got[0].Format(time.DateTime), zone)
		require.Equal(t, "2032-02-29 09:00:00", got[1].Format(time.DateTime), zone)
		require.Equal(t, s.Location(), got[0].Location())
	}
}

func TestNoSlot(t *testing.T) {
	t.Parallel()
	s := mustNew(t, Spec{Cron: "0 0 30 2 *"})
	_, ok := s.Next(mustTime(t, "2026-01-01T00:00:00Z"))
	require.False(t, ok)
	require.Empty(t, s.NextN(mustTime(t, "2026-01-01T00:00:00Z"), 5))
	require.Empty(t, mustNew(t, Spec{Cron: "@daily"}).NextN(mustTime(t, "2026-01-01T00:00:00Z"), 0))
}

func TestSeconds(t *testing.T) {
	t.Parallel()
	s := mustNew(t, Spec{Cron: "*/20 * * * * *"})
	require.Equal(t, []time.Time{
		mustTime(t, "2026-01-01T00:00:20Z"),
		mustTime(t, "2026-01-01T00:00:40Z"),
		mustTime(t, "2026-01-01T00:01:00Z"),
	}, s.NextN(mustTime(t, "2026-01-01T00:00:05.5Z"), 3))

	s = mustNew(t, Spec{Cron: "30 0 9 * * *", Timezone: "Asia/Shanghai"})
	got, ok := s.Next(mustTime(t, "2026-01-01T09:00:00+08:00"))
	require.True(t, ok)
	require.Equal(t, "2026-01-01T09:00:30+08:00", got.Format(time.RFC3339))

	// Five fields mean second 0.
	s = mustNew(t, Spec{Cron: "0 9 * * *"})
	got, ok = s.Next(mustTime(t, "2026-01-01T09:00:00.000000001Z"))
	require.True(t, ok)
	require.Equal(t, "2026-01-02T09:00:00Z", got.Format(time.RFC3339))
}

func TestEvery(t *testing.T) {
	t.Parallel()
	s := mustNew(t, Spec{Cron: "@every 30s"})
	cases := []struct{ after, want string }{
		{"2026-01-01T00:00:10Z", "2026-01-01T00:00:30Z"},
		{"2026-01-01T00:00:29.999Z", "2026-01-01T00:00:30Z"},
		{"2026-01-01T00:00:30Z", "2026-01-01T00:01:00Z"}, // strictly after
		{"1969-12-31T23:59:50Z", "2026-01-01T00:00:00Z"}, // placeholder, replaced below
	}
	cases[3].want = "1970-01-01T00:00:00Z" // before the epoch too
	for _, c := range cases {
		got, ok := s.Next(mustTime(t, c.after))
		require.True(t, ok)
		require.Equal(t, c.want, got.UTC().Format(time.RFC3339), "after %s", c.after)
	}

	// Two leaders starting at different moments agree on the grid.
	s = mustNew(t, Spec{Cron: "@every 7m", Timezone: "Asia/Kolkata"})
	a := s.NextN(mustTime(t, "2026-05-01T10:03:17Z"), 4)
	b := s.NextN(a[0].Add(200*time.Second), 3) // another leader, another moment
	require.Equal(t, fmtAll(a[1:]), fmtAll(b))
	for _, x := range a {
		require.Zero(t, x.Unix()%(7*60), x)
		require.Equal(t, "Asia/Kolkata", x.Location().String())
	}
}

func TestDescriptors(t *testing.T) {
	t.Parallel()
	from := mustTime(t, "2026-05-13T10:00:00+08:00") // a Wednesday
	cases := map[string]string{
		"@yearly":   "2027-01-01T00:00:00+08:00",
		"@annually": "2027-01-01T00:00:00+08:00",
		"@monthly":  "2026-06-01T00:00:00+08:00",
		"@weekly":   "2026-05-17T00:00:00+08:00", // Sunday
		"@daily":    "2026-05-14T00:00:00+08:00",
		"@midnight": "2026-05-14T00:00:00+08:00",
		"@hourly":   "2026-05-13T11:00:00+08:00",
	}
	for spec, want := range cases {
		got, ok := mustNew(t, Spec{Cron: spec, Timezone: "Asia/Shanghai"}).Next(from)
		require.True(t, ok)
		require.Equal(t, want, got.Format(time.RFC3339), spec)
	}
}

// TestMatchesRobfig checks the day and time matching against robfig/cron's
// own Next in zones without DST, where robfig is right.
func TestMatchesRobfig(t *testing.T) {
	t.Parallel()
	specs := []string{
		"0 9 * * 1-5", "*/7 3-5 * * *", "0 0 1,15 * 3", "0 12 * * 0", "5 4 * * sun",
		"15 10 ? * MON-FRI", "0 30 9 * * *", "@monthly", "0 0 29 2 *", "0 0 * * 7-7",
		"10-20/5 8 13 * FRI", "0 0 31 * *", "59 23 L * *", "0 6 * JAN,jul *",
	}
	for _, zone := range []string{"UTC", "Asia/Shanghai"} {
		loc, err := time.LoadLocation(zone)
		require.NoError(t, err)
		for _, spec := range specs {
			ref, refErr := parser.Parse(spec)
			ours, err := New(Spec{Cron: spec, Timezone: zone}, nil)
			if refErr != nil {
				require.ErrorIs(t, err, ErrBadCron, spec)
				continue
			}
			require.NoError(t, err, spec)
			ref.(*cron.SpecSchedule).Location = loc
			from := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
			var want []time.Time
			for at := from; len(want) < 40; {
				// robfig gives up five years after its argument, as we do.
				if at = ref.Next(at); at.IsZero() {
					break
				}
				want = append(want, at)
			}
			require.Equal(t, fmtAll(want), fmtAll(ours.NextN(from, 40)), "%s in %s", spec, zone)
		}
	}
}

// TestRobfigStarBit pins the robfig/cron detail dayMatches depends on.
func TestRobfigStarBit(t *testing.T) {
	t.Parallel()
	star, err := parser.Parse("* * * * *")
	require.NoError(t, err)
	require.NotZero(t, star.(*cron.SpecSchedule).Dom&starBit)
	require.NotZero(t, star.(*cron.SpecSchedule).Dow&starBit)
	list, err := parser.Parse("0 0 1 * 1")
	require.NoError(t, err)
	require.Zero(t, list.(*cron.SpecSchedule).Dom&starBit)
}

func TestAccessors(t *testing.T) {
	t.Parallel()
	spec := Spec{Cron: "0 9 * * *", Timezone: "Asia/Shanghai", Calendar: "cn_workday"}
	s := mustNew(t, spec)
	require.Equal(t, spec, s.Spec())
	require.Equal(t, "Asia/Shanghai", s.Location().String())
	require.Equal(t, `"0 9 * * *" in Asia/Shanghai on cn_workday (skip)`, s.String())
	require.Equal(t, time.UTC, mustNew(t, Spec{Cron: "@daily"}).Location())
}

func TestConcurrentNext(t *testing.T) {
	t.Parallel()
	s := mustNew(t, Spec{Cron: "*/15 * * * *", Timezone: "America/New_York", Calendar: "cn_workday", Shift: "next_workday"})
	from := mustTime(t, "2026-09-30T00:00:00Z")
	want := s.NextN(from, 50)
	var wg sync.WaitGroup
	results := make([][]time.Time, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.NextN(from, 50)
		}()
	}
	wg.Wait()
	for _, r := range results {
		require.Equal(t, want, r)
	}
}

func TestExtremeAfter(t *testing.T) {
	t.Parallel()
	for _, spec := range []Spec{
		{Cron: "0 9 * * *", Timezone: "Asia/Shanghai", Calendar: "cn_workday", Shift: "next_workday"},
		{Cron: "@every 1h", Calendar: "cn_workday"},
	} {
		s := mustNew(t, spec)
		for _, after := range []time.Time{{}, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)} {
			got, ok := s.Next(after)
			require.True(t, ok, "%+v after %s", spec, after)
			require.True(t, got.After(after))
		}
	}
}
