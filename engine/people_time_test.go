package engine

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// Issue 10's "must show" list on the fake clock: each person's local time
// and quiet hours (digests are in digest_test.go).

// zonedPeople plans, like the rules package, for the people of the run's
// zone only, each with their zone and quiet window.
func zonedPeople(zones map[string]string, quiet QuietHours) func(RunContext) []Planned {
	return func(run RunContext) []Planned {
		var out []Planned
		for _, who := range []string{"shanghai", "berlin", "newyork"} {
			z, ok := zones[who]
			if !ok || (run.Zone != z && run.Data == nil) {
				continue
			}
			out = append(out, Planned{Recipient: who, Zone: z, Quiet: quiet,
				Payload: json.RawMessage(`{"msgtype":"text","content":"09:00 report"}`)})
		}
		return out
	}
}

var threeZones = map[string]string{"shanghai": "Asia/Shanghai", "berlin": "Europe/Berlin", "newyork": "America/New_York"}

func TestLocalNineAcrossBothDSTChanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		from, to time.Time
	}{
		// America/New_York springs forward on 8 March 2026, Europe/Berlin
		// on 29 March; Berlin falls back on 25 October, New York on 1
		// November.
		{"spring", time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC)},
		{"autumn", time.Date(2026, 10, 23, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSim(t, tc.from, Rule{Name: "report", Schedule: "0 9 * * *", Timezone: "Asia/Shanghai", Channel: "mock",
				PerRecipient: true, Zones: []string{"America/New_York", "Asia/Shanghai", "Europe/Berlin"}})
			s.rules.plan["report"] = zonedPeople(threeZones, QuietHours{})
			s.lead("n1")
			mid := tc.from.Add(tc.to.Sub(tc.from) / 2)
			s.advance(mid, time.Minute)
			s.lead("n2") // a leader change half way: nothing twice, nothing missed
			s.advance(tc.to, time.Minute)

			days := int(tc.to.Sub(tc.from).Hours() / 24)
			for who, zone := range threeZones {
				loc := mustZone(t, zone)
				got := s.sender.sentTo(who)
				perDay := map[string]int{}
				for _, m := range got {
					local := m.at.In(loc)
					require.Equal(t, "09:00:00", local.Format(time.TimeOnly), "%s got a message at %s", who, local)
					perDay[local.Format(time.DateOnly)]++
				}
				for d, n := range perDay {
					require.Equal(t, 1, n, "%s on %s", who, d)
				}
				// The first and last day may fall outside the window in
				// some zones; every day in between has its message.
				require.GreaterOrEqual(t, len(perDay), days-1, who)
				require.LessOrEqual(t, len(perDay), days, who)
			}
			for _, r := range s.runs("report") {
				require.False(t, r.Late, r.Key)
				require.Equal(t, "09:00", r.Slot.In(mustZone(t, r.Zone)).Format("15:04"), r.Key)
				require.Equal(t, ZoneRunKey("report", r.Zone, r.Slot), r.Key)
			}
		})
	}
}

func TestPersonMovingZonesGetsNineOnce(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	zones := map[string]string{"berlin": "Europe/Berlin"}
	s := newSim(t, start, Rule{Name: "report", Schedule: "0 9 * * *", Timezone: "Asia/Shanghai", Channel: "mock",
		PerRecipient: true, Zones: []string{"America/New_York", "Asia/Shanghai", "Europe/Berlin"}})
	plan := zonedPeople(zones, QuietHours{})
	s.rules.plan["report"] = func(run RunContext) []Planned { return plan(run) }
	s.lead("n1")
	s.advance(start.Add(10*time.Hour), time.Minute) // 09:00 Berlin has gone
	zones["berlin"] = "America/New_York"            // the people file moves them to New York
	s.advance(start.Add(20*time.Hour), time.Minute) // 09:00 New York
	require.Len(t, s.sender.sentTo("berlin"), 1, "09:00 of 1 December once, though in two zones")
}

func TestQuietHours(t *testing.T) {
	t.Parallel()
	sh := mustZone(t, "Asia/Shanghai")
	start := time.Date(2026, 12, 1, 23, 0, 0, 0, sh)
	quiet := QuietHours{From: 22 * time.Hour, To: 8 * time.Hour}
	s := newSim(t, start,
		Rule{Name: "reminder", Timezone: "Asia/Shanghai", Channel: "mock", Deadline: 12 * time.Hour},
		Rule{Name: "alert", Timezone: "Asia/Shanghai", Channel: "mock", Priority: heraldtype.PriorityHigh},
		Rule{Name: "strict", Timezone: "Asia/Shanghai", Channel: "mock", Priority: heraldtype.PriorityHigh, QuietStrict: true, Deadline: 12 * time.Hour},
		Rule{Name: "short", Timezone: "Asia/Shanghai", Channel: "mock", Deadline: time.Hour})
	for _, r := range []string{"reminder", "alert", "strict", "short"} {
		s.rules.plan[r] = func(run RunContext) []Planned {
			return []Planned{{Recipient: r, Zone: "Asia/Shanghai", Quiet: quiet, Payload: json.RawMessage(`{}`)}}
		}
	}
	s.lead("n1")
	at := time.Date(2026, 12, 1, 23, 30, 0, 0, sh)
	for _, r := range []string{"reminder", "alert", "strict", "short"} {
		s.apply(CmdSubmitTask, SubmitTask{Key: r + "-1", Rule: r, DueAt: at, Data: []byte(`{}`), Now: start})
	}
	s.advance(at.Add(2*time.Hour), time.Second)
	s.lead("n2") // a new leader in the night holds them as the first did
	s.advance(time.Date(2026, 12, 2, 9, 0, 0, 0, sh), time.Second)

	r := s.sender.sentTo("reminder")
	require.Len(t, r, 1, "held, then sent once")
	require.Equal(t, time.Date(2026, 12, 2, 8, 0, 0, 0, sh), r[0].at.In(sh))
	a := s.sender.sentTo("alert")
	require.Len(t, a, 1)
	require.Equal(t, at, a[0].at.In(sh), "high priority ignores quiet hours")
	st := s.sender.sentTo("strict")
	require.Len(t, st, 1)
	require.Equal(t, time.Date(2026, 12, 2, 8, 0, 0, 0, sh), st[0].at.In(sh), "quiet_hours_strict holds high too")

	// The one whose deadline (00:30) ends inside the window expired at its
	// deadline, with an alert that says why.
	require.Empty(t, s.sender.sentTo("short"))
	d, ok := s.log.fsm.Delivery(DeliveryID(TaskRunKey("short-1"), "short"))
	require.True(t, ok)
	require.Equal(t, StateExpired, d.State)
	require.True(t, at.Add(time.Hour).Equal(d.EndedAt), d.EndedAt)
	require.Len(t, alertsWith(s.log.fsm, "expired:"+TaskRunKey("short-1")), 1)
	// Said when it was planned, at 23:30, with the reason.
	why := alertsWith(s.log.fsm, "quiet-expired:"+TaskRunKey("short-1"))
	require.Len(t, why, 1)
	require.True(t, at.Equal(why[0].First), why[0].First)
	require.Contains(t, why[0].Message, "short (deadline 2026-12-02T00:30:00+08:00, quiet hours 22:00–08:00 Asia/Shanghai until 2026-12-02T08:00:00+08:00)")
	require.Empty(t, alertsWith(s.log.fsm, "quiet-expired:"+TaskRunKey("reminder-1")))
}

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
		require.Equal(t, tc.want != base, got.Held != "", tc.zone)
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
