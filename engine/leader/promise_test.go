package leader

// Named after no source file: issue 5's "must show" promises, each
// through the whole leader on the fake clock of sim_test.go.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

func TestDSTInNewYork(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	tests := []struct {
		name, cron string
		from, to   time.Time
		want       []string
	}{
		// 2026-03-08 02:30 does not exist (02:00 → 03:00): once, at the next valid instant.
		{"spring gap", "30 2 * * *", time.Date(2026, 3, 7, 12, 0, 0, 0, ny), time.Date(2026, 3, 9, 12, 0, 0, 0, ny),
			[]string{"2026-03-08 03:00 EDT", "2026-03-09 02:30 EDT"}},
		// 2026-11-01 01:30 happens twice (EDT, then EST): once.
		{"autumn repeat", "30 1 * * *", time.Date(2026, 10, 31, 12, 0, 0, 0, ny), time.Date(2026, 11, 2, 12, 0, 0, 0, ny),
			[]string{"2026-11-01 01:30 EDT", "2026-11-02 01:30 EST"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSim(t, tc.from, engine.Rule{Name: "ny", Schedule: tc.cron, Timezone: "America/New_York", Channel: "mock"})
			s.rules.plan["ny"] = to("alice")
			s.lead("n1")
			s.advance(tc.to, time.Second)
			runs := s.runs("ny")
			require.Equal(t, tc.want, slotsIn(runs, "America/New_York"))
			for _, r := range runs {
				require.False(t, r.Late, "fired on time by a live leader")
			}
			require.Len(t, s.sender.sentTo("alice"), len(tc.want), "one message per slot")
		})
	}
}

func TestChinaWorkdays(t *testing.T) {
	t.Parallel()
	sh := mustZone(t, "Asia/Shanghai")
	s := newSim(t, time.Date(2025, 9, 26, 10, 0, 0, 0, sh),
		engine.Rule{Name: "daily", Schedule: "0 9 * * *", Timezone: "Asia/Shanghai", Calendar: "cn_workday", Channel: "mock"})
	s.rules.plan["daily"] = to("alice")
	s.lead("n1")
	s.advance(time.Date(2025, 10, 13, 10, 0, 0, 0, sh), 30*time.Second)
	// Sunday 28 September is a make-up workday (调休); 1–8 October are the
	// National Day holiday, Monday 6 October included; Saturday 11 October
	// is a make-up workday again.
	require.Equal(t, []string{
		"2025-09-28 09:00 CST", "2025-09-29 09:00 CST", "2025-09-30 09:00 CST",
		"2025-10-09 09:00 CST", "2025-10-10 09:00 CST", "2025-10-11 09:00 CST", "2025-10-13 09:00 CST",
	}, slotsIn(s.runs("daily"), "Asia/Shanghai"))
}

func TestTwentyNinthOfFebruary(t *testing.T) {
	t.Parallel()
	s := newSim(t, time.Date(2027, 2, 27, 0, 0, 0, 0, time.UTC),
		engine.Rule{Name: "leap", Schedule: "0 9 29 2 *", Channel: "mock"})
	s.rules.plan["leap"] = to("alice")
	s.lead("n1")
	// A live leader that wakes as it is told: 2027 has no 29 February, so
	// the next slot is a year away; jumping there is what its timer does.
	for _, at := range []time.Time{
		time.Date(2027, 3, 1, 9, 0, 0, 0, time.UTC),
		time.Date(2028, 2, 28, 9, 0, 0, 0, time.UTC),
		time.Date(2028, 2, 29, 9, 0, 0, 0, time.UTC),
		time.Date(2028, 3, 1, 9, 0, 0, 0, time.UTC),
		time.Date(2029, 3, 1, 9, 0, 0, 0, time.UTC),
	} {
		s.clock.Set(at)
		next := s.step()
		require.True(t, next.After(at))
	}
	require.Equal(t, []string{"2028-02-29 09:00 UTC"}, slotsIn(s.runs("leap"), "UTC"))
	require.Len(t, s.sender.sentTo("alice"), 1)
}

func TestTwoHourLeaderOutage(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := newSim(t, day.Add(6*time.Hour+30*time.Minute),
		engine.Rule{Name: "hourly", Schedule: "0 * * * *", Channel: "mock", Catchup: time.Hour})
	s.rules.plan["hourly"] = to("alice", "bob")
	s.lead("n1")
	s.advance(day.Add(7*time.Hour+50*time.Minute), time.Second)
	s.outage() // 07:50 → 09:50: no leader
	s.clock.Set(day.Add(9*time.Hour + 50*time.Minute))
	s.lead("n2")
	s.advance(day.Add(10*time.Hour+30*time.Minute), time.Second)
	s.lead("n3") // and another leader change: nothing fires twice
	s.advance(day.Add(10*time.Hour+40*time.Minute), time.Second)

	byHour := map[int]*engine.Run{}
	for _, r := range s.runs("hourly") {
		byHour[r.Slot.Hour()] = r
	}
	require.Len(t, byHour, 4) // 07, 08, 09, 10
	require.False(t, byHour[7].Late)
	// 08:00 was missed by 1h50m, beyond the 1h catch-up: skipped, alerted.
	require.Equal(t, engine.RunSkipped, byHour[8].State)
	require.Empty(t, s.log.fsm.RunDeliveries(byHour[8].Key))
	skipped := alertsWith(s.log.fsm, "skipped:hourly")
	require.Len(t, skipped, 1)
	require.Contains(t, skipped[0].Message, "2026-12-01T08:00:00Z")
	// 09:00 was missed by 50m, within it: fired once, late and flagged.
	require.Equal(t, engine.RunPlanned, byHour[9].State)
	require.True(t, byHour[9].Late)
	require.False(t, byHour[10].Late)
	for _, who := range []string{"alice", "bob"} {
		var slots []int
		for _, m := range s.sender.sentTo(who) {
			d, _ := s.log.fsm.Delivery(m.key)
			slots = append(slots, d.Slot.Hour())
		}
		require.Equal(t, []int{7, 9, 10}, slots, who)
	}
	require.Equal(t, 1, s.log.fsm.DayStats("2026-12-01")["hourly"].Skipped)
}

func TestRetriesSurviveALeaderChange(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, slot.Add(-time.Minute), engine.Rule{Name: "r", Schedule: "0 1 * * *", Channel: "mock"})
	s.rules.plan["r"] = to("alice")
	failures := 0
	s.sender.failFunc = func(heraldtype.Message) (heraldtype.Status, bool) {
		failures++
		return heraldtype.StatusRetryable, failures <= 2
	}
	s.lead("n1")
	s.advance(slot.Add(30*time.Second), time.Second) // attempt 1 at the slot fails
	s.lead("n2")                                     // leader change between the attempts
	s.advance(slot.Add(10*time.Minute), time.Second)

	id := engine.DeliveryID(engine.RunKey("r", slot), "alice")
	d, _ := s.log.fsm.Delivery(id)
	require.Equal(t, engine.StateSent, d.State)
	require.Equal(t, 3, d.Attempts)
	got := s.sender.sentTo("alice")
	require.Len(t, got, 1)
	// Attempt 1 at the slot, 2 at +1m, 3 at +1m+5m: the replicated backoff.
	require.Equal(t, slot.Add(6*time.Minute), got[0].at)
	require.Equal(t, 3, got[0].attempt)
	require.Equal(t, 3, failures)
}

func TestWavesAndAHighPriorityBirthday(t *testing.T) {
	t.Parallel()
	nine := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := newSim(t, nine.Add(-time.Minute),
		engine.Rule{Name: "report", Schedule: "0 9 * * *", Channel: "wecom", Stagger: engine.Stagger{Batches: 10, Spacing: time.Minute}, Deadline: time.Hour},
		engine.Rule{Name: "birthday", Schedule: "30 0 9 * * *", Channel: "wecom", Priority: heraldtype.PriorityHigh})
	people := make([]string, 10000)
	for i := range people {
		people[i] = fmt.Sprintf("u%05d", i)
	}
	s.rules.plan["report"] = to(people...)
	s.rules.plan["birthday"] = to("shouxing")
	// The channel takes 20 messages a second, a fifth reserved for high:
	// a wave of 1,000 takes 50 s to drain.
	s.sender.limiter = rate.NewLimiter(20, 20)
	s.sender.reserve = 0.2
	s.lead("n1")
	s.advance(nine.Add(11*time.Minute), 250*time.Millisecond)

	all := s.sender.all()
	require.Len(t, all, 10001)
	waves := map[time.Time]int{}
	for _, d := range s.log.fsm.RunDeliveries(engine.RunKey("report", nine)) {
		waves[d.NotBefore]++
		require.NotZero(t, d.NotBefore.Second(), "nothing planned on :00 or :30")
		require.NotEqual(t, 30, d.NotBefore.Second())
	}
	require.Len(t, waves, 10)
	for k := range 10 {
		require.Equal(t, 1000, waves[nine.Add(time.Duration(k)*time.Minute+time.Second)], "wave %d", k)
	}
	for _, m := range all {
		d, _ := s.log.fsm.Delivery(m.key)
		require.False(t, m.at.Before(d.NotBefore), "sent before its wave")
	}
	b := s.sender.sentTo("shouxing")
	require.Len(t, b, 1)
	due := nine.Add(30 * time.Second)
	require.False(t, b[0].at.Before(due))
	require.LessOrEqual(t, b[0].at.Sub(due), time.Second, "the birthday waited behind the reports")
	// ...while the first wave was still draining.
	var firstWaveAfter int
	for _, m := range all {
		if m.to != "shouxing" && m.at.After(b[0].at) && m.at.Before(nine.Add(time.Minute)) {
			firstWaveAfter++
		}
	}
	require.Positive(t, firstWaveAfter)
}

func TestHalfTheEnquiriesCancelled(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	s := newSim(t, start, engine.Rule{Name: "enquiry_timeout", Channel: "wecom", Priority: heraldtype.PriorityHigh})
	s.rules.plan["enquiry_timeout"] = func(run engine.RunContext) []engine.Planned {
		return []engine.Planned{{Recipient: strings.Trim(string(run.Data), `{}"a:`), Payload: []byte(`{}`)}}
	}
	s.lead("n1")
	due := start.Add(time.Minute)
	for i := range 1000 {
		res := s.apply(engine.CmdSubmitTask, engine.SubmitTask{Key: fmt.Sprintf("enq-%d", i), Rule: "enquiry_timeout",
			DueAt: due.Add(time.Duration(i) * 60 * time.Millisecond), Data: []byte(fmt.Sprintf(`{"a":"p%d"}`, i)), Now: start})
		require.True(t, res.(engine.SubmitResult).Created)
	}
	// The scheduler wakes for the first task, not a minute later.
	require.Equal(t, due, s.step())
	for i := 0; i < 1000; i += 2 {
		res := s.apply(engine.CmdCancelTask, engine.CancelTask{Key: fmt.Sprintf("enq-%d", i), Now: start.Add(30 * time.Second)})
		require.Equal(t, engine.TaskCancelled, res.(engine.CancelResult).Task.State)
	}
	s.advance(due.Add(2*time.Minute), time.Millisecond)

	all := s.sender.all()
	require.Len(t, all, 500)
	got := map[string]bool{}
	for _, m := range all {
		got[m.to] = true
	}
	for i := range 1000 {
		require.Equal(t, i%2 == 1, got[fmt.Sprintf("p%d", i)], "enquiry %d", i)
		tk, _ := s.log.fsm.Task(fmt.Sprintf("enq-%d", i))
		if i%2 == 1 {
			require.Equal(t, engine.TaskFired, tk.State)
			// Fired on time: the due queue, not a polling loop.
			require.LessOrEqual(t, tk.FiredAt.Sub(tk.DueAt), time.Millisecond)
		}
	}
	// Too late to cancel: the answer says what happened.
	err, _ := s.apply(engine.CmdCancelTask, engine.CancelTask{Key: "enq-1", Now: due.Add(3 * time.Minute)}).(error)
	require.ErrorIs(t, err, engine.ErrTaskFired)
	require.Contains(t, err.Error(), "1 sent")
}

func TestMondaysFailureTravelsWithTuesday(t *testing.T) {
	t.Parallel()
	sh := mustZone(t, "Asia/Shanghai")
	monday := time.Date(2026, 11, 30, 9, 0, 0, 0, sh)
	s := newSim(t, monday.Add(-time.Minute),
		engine.Rule{Name: "daily_report", Schedule: "0 9 * * *", Timezone: "Asia/Shanghai", Calendar: "cn_workday", Channel: "wecom", Retry: []time.Duration{time.Minute}},
		engine.Rule{Name: "ops_alert", Channel: "wecom_ops", Priority: heraldtype.PriorityHigh})
	s.rules.plan["daily_report"] = func(run engine.RunContext) []engine.Planned {
		var out []engine.Planned
		for _, who := range []string{"alice", "bob"} {
			text := "report " + run.Slot.Format(time.DateOnly)
			if m := run.Missed[who]; len(m) > 0 {
				text += " (with " + strings.Join(m, ",") + ")"
			}
			out = append(out, engine.Planned{Recipient: who, Payload: []byte(`"` + text + `"`)})
		}
		return out
	}
	s.rules.plan["ops_alert"] = func(run engine.RunContext) []engine.Planned {
		return []engine.Planned{{Recipient: "oncall", Payload: run.Data}}
	}
	s.sender.failFunc = func(m heraldtype.Message) (heraldtype.Status, bool) {
		return heraldtype.StatusPermanent, m.Recipient == "bob" && strings.HasPrefix(string(m.Payload), `"report 2026-11-30`)
	}
	s.lead("n1")
	s.advance(monday.Add(3*time.Hour), time.Second)
	s.lead("n2") // the alert is not delivered again by a new leader
	s.advance(monday.Add(25*time.Hour), time.Second)

	failed := alertsWith(s.log.fsm, "failed:")
	require.Len(t, failed, 1)
	require.Equal(t, 1, failed[0].Count)
	alerts := s.sender.sentTo("oncall")
	require.Len(t, alerts, 1, "an alert once")
	require.Contains(t, alerts[0].payload, `"kind":"delivery_failed"`)
	require.Contains(t, alerts[0].payload, "bob")
	// on_failed ran once for bob's Monday delivery.
	require.Len(t, s.rules.onFailed, 1)
	require.Equal(t, "bob", s.rules.onFailed[0].Recipient)

	bob := s.sender.sentTo("bob")
	require.Len(t, bob, 1)
	require.Equal(t, `"report 2026-12-01 (with 2026-11-30T09:00:00+08:00)"`, bob[0].payload)
	require.Empty(t, s.log.fsm.Missed("daily_report"), "made good by Tuesday's message")
	require.Len(t, s.sender.sentTo("alice"), 2)

	st := s.log.fsm.DayStats("2026-11-30")["daily_report"]
	require.Equal(t, 1, st.Sent)
	require.Equal(t, 1, st.Failed)
	require.Equal(t, map[string]int{"code 50001": 1}, st.Reasons)
}

func mustZone(t *testing.T, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}
