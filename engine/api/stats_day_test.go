package api_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/calendar"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/engine/schedule"
)

// sendAll plans one delivery per recipient in a run of rule at slot and
// settles each claim with the outcome and time settle gives it.
func sendAll(t *testing.T, n *enginetest.Replicator, rule string, slot time.Time, recipients []string,
	settle func(i int) (heraldtype.Status, time.Time)) string {
	t.Helper()
	return sendAllIn(t, n, rule, "Asia/Shanghai", slot, recipients, settle)
}

// sendAllIn is sendAll for a rule in zone.
func sendAllIn(t *testing.T, n *enginetest.Replicator, rule, zone string, slot time.Time, recipients []string,
	settle func(i int) (heraldtype.Status, time.Time)) string {
	t.Helper()
	key := engine.RunKey(rule, slot)
	n.MustApply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: rule, Slot: slot, Zone: zone,
		Date: engine.SlotDate(slot, zone), Now: slot})
	var nds []engine.NewDelivery
	for _, r := range recipients {
		nds = append(nds, engine.NewDelivery{ID: engine.DeliveryID(key, r), Recipient: r, Channel: "mock", NotBefore: slot,
			Deadline: slot.Add(2 * time.Hour), Payload: json.RawMessage(`{"msgtype":"text","content":"日报 ` + r + `"}`)})
	}
	for chunk := range slices.Chunk(nds, 500) {
		n.MustApply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: chunk})
	}
	n.MustApply(t, engine.CmdFinishPlan, engine.FinishPlan{RunKey: key, Now: slot})
	for i, nd := range nds {
		status, at := settle(i)
		c := n.MustApply(t, engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{nd.ID}, Leader: "n1", Now: slot, Timeout: 3 * time.Hour}).(engine.ClaimResult)
		require.Len(t, c.Claimed, 1)
		n.MustApply(t, engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: at, Results: []engine.Settlement{
			{ID: nd.ID, Seq: c.Claimed[0].Seq, Status: status, Code: "60020", Error: "not allow to access from your ip"}}})
	}
	return key
}

// The p95 the API (and so the dashboard) shows is the nearest-rank p95
// of the slot → sent times recorded on the deliveries, within
// engine.SketchPrecision (0.8%): not a histogram bucket's bound. The
// issue saw 0.9 s for sends that all took milliseconds.
func TestStatsP95IsThePercentileOfRecordedTimes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		lat  func(*rand.Rand) time.Duration
	}{
		{"milliseconds", func(r *rand.Rand) time.Duration { return time.Duration(r.IntN(50_000)) * time.Microsecond }},
		{"staggered", func(r *rand.Rand) time.Duration { return time.Duration(r.Int64N(int64(10 * time.Minute))) }},
		{"a slow tail", func(r *rand.Rand) time.Duration {
			if r.IntN(10) == 0 {
				return time.Duration(r.Int64N(int64(40 * time.Minute)))
			}
			return time.Duration(r.IntN(900)) * time.Millisecond
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupAPI(t)
			rng := rand.New(rand.NewPCG(7, uint64(len(tc.name))))
			slot := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
			var people []string
			for i := range 1500 {
				people = append(people, fmt.Sprintf("u%04d", i))
			}
			sendAll(t, b.node, "daily", slot, people, func(int) (heraldtype.Status, time.Time) { return heraldtype.StatusSent, slot.Add(tc.lat(rng)) })

			var recorded []time.Duration
			for _, d := range b.node.FSM.Deliveries(nil) {
				recorded = append(recorded, d.SentAt.Sub(d.Slot))
			}
			slices.Sort(recorded)
			want := recorded[int(math.Ceil(0.95*float64(len(recorded))))-1]

			code, out := b.do(t, http.MethodGet, "/v1/stats?date=2026-12-01", "")
			require.Equal(t, http.StatusOK, code)
			rule := out["rules"].([]any)[0].(map[string]any)
			sts := rule["slot_to_sent"].(map[string]any)
			require.Equal(t, true, sts["precise"])
			require.InDelta(t, engine.SketchPrecision, sts["precision"], 1e-12)
			tol := math.Max(want.Seconds()*engine.SketchPrecision, 1e-6)
			require.InDelta(t, want.Seconds(), sts["p95_seconds"], tol, "p95 of the recorded times")
			require.InDelta(t, want.Seconds(), rule["slot_to_sent_p95_seconds"], tol, "the old field says the same")
			require.InDelta(t, recorded[len(recorded)-1].Seconds(), sts["max_seconds"], 1e-9)
			var sum uint64
			for _, h := range sts["histogram"].([]any) {
				sum += uint64(h.(map[string]any)["count"].(float64))
			}
			require.Equal(t, uint64(len(recorded)), sum, "every send is in one bar")
		})
	}
}

// A day recorded by a build without sketches (a snapshot from before) is
// still summarised, from the coarse buckets, and says it is an estimate.
func TestStatsOldAggregatesAreMarkedEstimated(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	slot := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	sendAll(t, b.node, "daily", slot, []string{"a", "b"}, func(i int) (heraldtype.Status, time.Time) {
		return heraldtype.StatusSent, slot.Add(time.Duration(i+1) * time.Second)
	})
	var buf strings.Builder
	snap, err := b.node.FSM.Snapshot()
	require.NoError(t, err)
	require.NoError(t, snap.Persist(&buf))
	snap.Release()
	// Replay the aggregates without their sketch, as an older build wrote them.
	fsm := engine.NewFSM()
	require.NoError(t, fsm.Restore(strings.NewReader(buf.String())))
	day := fsm.DayStats("2026-12-01")["daily"]
	require.NotNil(t, day.SlotToSentSketch, "sketches survive a snapshot")
	require.Equal(t, uint64(2), day.SlotToSentSketch.Count)
	require.Len(t, day.Minutes, 1)
	require.Equal(t, uint32(2), day.Minutes[0].Sent)
}

func TestStatsMissedSlotsTasksDueAndNextFires(t *testing.T) {
	t.Parallel()
	n := enginetest.New()
	cals := calendar.NewRegistry()
	now := time.Date(2026, 12, 1, 3, 30, 0, 0, time.UTC) // 11:30 in Shanghai
	h := api.New(api.Config{Hosts: testHosts, FSM: n.FSM, Replicator: n, Rules: taskRules, NowFunc: func() time.Time { return now },
		StatusFunc: func() api.Status { return api.Status{} },
		ScheduleFunc: func(r engine.Rule) (engine.Schedule, error) {
			return schedule.New(schedule.Spec{Cron: r.Schedule, Timezone: r.Timezone}, cals)
		}})
	get := func() api.Stats {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/stats?date=2026-12-01", nil))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var st api.Stats
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &st))
		return st
	}
	find := func(st api.Stats, rule string) *api.RuleStats {
		for i := range st.Rules {
			if st.Rules[i].Rule == rule {
				return &st.Rules[i]
			}
		}
		return nil
	}

	// A rule first seen after today's 09:00 did not miss it.
	n.MustApply(t, engine.CmdInitCursor, engine.InitCursor{Rule: "daily", At: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)})
	st := get()
	require.Nil(t, find(st, "daily"), "nothing expected of it today")
	require.Len(t, st.Upcoming, 1)
	require.Equal(t, "daily", st.Upcoming[0].Rule)
	require.Len(t, st.Upcoming[0].NextFires, 5)
	require.True(t, st.Upcoming[0].NextFires[0].Equal(time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)), "tomorrow 09:00 Shanghai")

	// Known since yesterday, and today's 09:00 never fired (no leader):
	// it stands out.
	n2 := enginetest.New()
	n2.MustApply(t, engine.CmdInitCursor, engine.InitCursor{Rule: "daily", At: time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)})
	h = api.New(api.Config{Hosts: testHosts, FSM: n2.FSM, Replicator: n2, Rules: taskRules, NowFunc: func() time.Time { return now },
		StatusFunc: func() api.Status { return api.Status{} },
		ScheduleFunc: func(r engine.Rule) (engine.Schedule, error) {
			return schedule.New(schedule.Spec{Cron: r.Schedule, Timezone: r.Timezone}, cals)
		}})
	n2.MustApply(t, engine.CmdSubmitTask, engine.SubmitTask{Key: "enq-1", Rule: "enquiry_timeout", DueAt: now.Add(4 * time.Hour), Now: now})
	n2.MustApply(t, engine.CmdSubmitTask, engine.SubmitTask{Key: "enq-2", Rule: "enquiry_timeout", DueAt: now.Add(5 * time.Hour), Now: now})
	n2.MustApply(t, engine.CmdSubmitTask, engine.SubmitTask{Key: "enq-3", Rule: "enquiry_timeout", DueAt: now.Add(24 * time.Hour), Now: now})
	st = get()
	daily := find(st, "daily")
	require.NotNil(t, daily)
	require.Equal(t, 1, daily.ExpectedSlots)
	require.Equal(t, 1, daily.MissedCount)
	require.Equal(t, "missing", daily.MissedSlots[0].State)
	require.True(t, daily.MissedSlots[0].Slot.Equal(time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)))
	enq := find(st, "enquiry_timeout")
	require.NotNil(t, enq)
	require.Equal(t, 2, enq.TasksDue, "two tasks due later today; tomorrow's is not counted")
	require.Equal(t, 2, st.Total.TasksDue)
	require.Equal(t, 1, st.Total.MissedCount)

	// Skipped beyond catch-up: still not sent, shown with why.
	slot := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	n2.MustApply(t, engine.CmdStartRun, engine.StartRun{Key: engine.RunKey("daily", slot), Rule: "daily", Slot: slot,
		Date: "2026-12-01", Skip: true, Now: now})
	daily = find(get(), "daily")
	require.Equal(t, 1, daily.MissedCount)
	require.Equal(t, "skipped", daily.MissedSlots[0].State)
}

type people map[string]string

func (p people) DisplayName(id string) string { return p[id] }
func (p people) Find(q string, limit int) []string {
	var out []string
	for id, name := range p {
		if (name == q || id == q) && len(out) < limit {
			out = append(out, id)
		}
	}
	return out
}

func TestDeliveriesOfAPerson(t *testing.T) {
	t.Parallel()
	n := enginetest.New()
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	h := api.New(api.Config{Hosts: testHosts, FSM: n.FSM, Replicator: n, NowFunc: func() time.Time { return now },
		StatusFunc: func() api.Status { return api.Status{} }, People: people{"lina": "李娜", "zhangwei": "张伟"}})
	slot := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	sendAll(t, n, "daily", slot, []string{"lina", "zhangwei"}, func(i int) (heraldtype.Status, time.Time) {
		if i == 0 {
			return heraldtype.StatusPermanent, slot.Add(time.Second)
		}
		return heraldtype.StatusSent, slot.Add(time.Second)
	})
	sendAll(t, n, "daily", slot.Add(-24*time.Hour), []string{"lina"}, func(int) (heraldtype.Status, time.Time) {
		return heraldtype.StatusSent, slot.Add(-24 * time.Hour)
	})
	get := func(target string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		var out map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), rec.Body.String())
		return rec.Code, out
	}
	for _, q := range []string{"lina", "%E6%9D%8E%E5%A8%9C"} { // by userid and by name (李娜)
		code, out := get("/v1/deliveries?recipient=" + q)
		require.Equal(t, http.StatusOK, code, out)
		require.Equal(t, "2026-12-01", out["date"], "today in the display zone by default")
		require.Equal(t, float64(1), out["total"], q)
		d := out["deliveries"].([]any)[0].(map[string]any)
		require.Equal(t, "lina", d["recipient"])
		require.Equal(t, "李娜", d["recipient_name"])
		require.Equal(t, "failed", d["state"])
		require.Equal(t, "日报 lina", d["payload"].(map[string]any)["content"], "the message as sent")
		f := d["failures"].([]any)[0].(map[string]any)
		require.Equal(t, "permanent", f["outcome"])
		require.Equal(t, "60020", f["code"])
		require.Equal(t, "not allow to access from your ip", f["error"])
		require.Equal(t, []any{map[string]any{"userid": "lina", "name": "李娜"}}, out["recipients"])
	}
	_, out := get("/v1/deliveries?recipient=lina&date=2026-11-30")
	require.Equal(t, float64(1), out["total"])
	require.Equal(t, "sent", out["deliveries"].([]any)[0].(map[string]any)["state"])
	_, out = get("/v1/deliveries?date=2026-12-01")
	require.Equal(t, float64(2), out["total"], "a date alone filters too")
	code, out := get("/v1/deliveries?recipient=lina&date=today")
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "date", out["field"])
}

// A person's day is the display zone's day, for the filter and for its
// default alike: "did 李娜 get it today?" finds what was sent today as the
// display zone counts it, whatever zone the rule runs in. Before, the
// filter took the run's date in the rule's zone while "today" was the
// display zone's, so for a rule eight hours ahead of (or behind) the
// display zone the search came back empty eight hours a day.
func TestPersonDayAtEveryHour(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{"Asia/Shanghai", "America/Los_Angeles"} {
		for hour := range 24 {
			slot := time.Date(2026, 12, 1, hour, 0, 0, 0, time.UTC)
			now := slot.Add(30 * time.Minute)
			n := enginetest.New()
			h := api.New(api.Config{Hosts: testHosts, FSM: n.FSM, Replicator: n, NowFunc: func() time.Time { return now }, DisplayTimezone: "Etc/UTC",
				StatusFunc: func() api.Status { return api.Status{} }, People: people{"lina": "李娜"}})
			sendAllIn(t, n, "daily", zone, slot, []string{"lina"}, func(int) (heraldtype.Status, time.Time) {
				return heraldtype.StatusSent, slot.Add(time.Second)
			})
			for _, q := range []string{"", "&date=2026-12-01"} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/deliveries?recipient=lina"+q, nil))
				require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
				var out struct {
					Date  string `json:"date"`
					Total int    `json:"total"`
				}
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
				require.Equal(t, "2026-12-01", out.Date, "%s at %02d:30 UTC%s", zone, hour, q)
				require.Equal(t, 1, out.Total, "a rule in %s sent at %02d:00 UTC, asked at %02d:30 UTC%s: %s", zone, hour, hour, q, rec.Body.String())
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/deliveries?recipient=lina&date=2026-12-02", nil))
			require.Contains(t, rec.Body.String(), `"total":0`, "%s at %02d:00 UTC is not the next day's", zone, hour)
		}
	}
}
