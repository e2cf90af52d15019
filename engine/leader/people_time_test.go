package leader

// Named after no source file: issue 10's "must show" list through the whole
// leader on the fake clock: each person's local time and quiet hours
// (digests are in digest_test.go).

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// zonedPeople plans, like the rules package, for the people of the run's
// zone only, each with their zone and quiet window.
func zonedPeople(zones map[string]string, quiet engine.QuietHours) func(engine.RunContext) []engine.Planned {
	return func(run engine.RunContext) []engine.Planned {
		var out []engine.Planned
		for _, who := range []string{"shanghai", "berlin", "newyork"} {
			z, ok := zones[who]
			if !ok || (run.Zone != z && run.Data == nil) {
				continue
			}
			out = append(out, engine.Planned{Recipient: who, Zone: z, Quiet: quiet,
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
			s := newSim(t, tc.from, engine.Rule{Name: "report", Schedule: "0 9 * * *", Timezone: "Asia/Shanghai", Channel: "mock",
				PerRecipient: true, Zones: []string{"America/New_York", "Asia/Shanghai", "Europe/Berlin"}})
			s.rules.plan["report"] = zonedPeople(threeZones, engine.QuietHours{})
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
				require.Equal(t, engine.ZoneRunKey("report", r.Zone, r.Slot), r.Key)
			}
		})
	}
}

func TestPersonMovingZonesGetsNineOnce(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	zones := map[string]string{"berlin": "Europe/Berlin"}
	s := newSim(t, start, engine.Rule{Name: "report", Schedule: "0 9 * * *", Timezone: "Asia/Shanghai", Channel: "mock",
		PerRecipient: true, Zones: []string{"America/New_York", "Asia/Shanghai", "Europe/Berlin"}})
	plan := zonedPeople(zones, engine.QuietHours{})
	s.rules.plan["report"] = func(run engine.RunContext) []engine.Planned { return plan(run) }
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
	quiet := engine.QuietHours{From: 22 * time.Hour, To: 8 * time.Hour}
	s := newSim(t, start,
		engine.Rule{Name: "reminder", Timezone: "Asia/Shanghai", Channel: "mock", Deadline: 12 * time.Hour},
		engine.Rule{Name: "alert", Timezone: "Asia/Shanghai", Channel: "mock", Priority: heraldtype.PriorityHigh},
		engine.Rule{Name: "strict", Timezone: "Asia/Shanghai", Channel: "mock", Priority: heraldtype.PriorityHigh, QuietStrict: true, Deadline: 12 * time.Hour},
		engine.Rule{Name: "short", Timezone: "Asia/Shanghai", Channel: "mock", Deadline: time.Hour})
	for _, r := range []string{"reminder", "alert", "strict", "short"} {
		s.rules.plan[r] = func(run engine.RunContext) []engine.Planned {
			return []engine.Planned{{Recipient: r, Zone: "Asia/Shanghai", Quiet: quiet, Payload: json.RawMessage(`{}`)}}
		}
	}
	s.lead("n1")
	at := time.Date(2026, 12, 1, 23, 30, 0, 0, sh)
	for _, r := range []string{"reminder", "alert", "strict", "short"} {
		s.apply(engine.CmdSubmitTask, engine.SubmitTask{Key: r + "-1", Rule: r, DueAt: at, Data: []byte(`{}`), Now: start})
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
	d, ok := s.log.fsm.Delivery(engine.DeliveryID(engine.TaskRunKey("short-1"), "short"))
	require.True(t, ok)
	require.Equal(t, engine.StateExpired, d.State)
	require.True(t, at.Add(time.Hour).Equal(d.EndedAt), d.EndedAt)
	require.Len(t, alertsWith(s.log.fsm, "expired:"+engine.TaskRunKey("short-1")), 1)
	// Said when it was planned, at 23:30, with the reason.
	why := alertsWith(s.log.fsm, "quiet-expired:"+engine.TaskRunKey("short-1"))
	require.Len(t, why, 1)
	require.True(t, at.Equal(why[0].First), why[0].First)
	require.Contains(t, why[0].Message, "short (deadline 2026-12-02T00:30:00+08:00, quiet hours 22:00–08:00 Asia/Shanghai until 2026-12-02T08:00:00+08:00)")
	require.Empty(t, alertsWith(s.log.fsm, "quiet-expired:"+engine.TaskRunKey("reminder-1")))
}
