package rules

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/calendar"
	"github.com/heraldhq/herald/engine/heraldtype"
)

var salespeople = []string{"lina", "wangfang", "liuyang", "chenjing", "zhaolei"}

func examples(t *testing.T) *Set {
	t.Helper()
	return load(t, "examples")
}

func recipientsOf(res PreviewResult) []string {
	var out []string
	for _, d := range res.Deliveries {
		out = append(out, d.Recipient)
	}
	return out
}

func payload(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

// content is the text of a payload in either shape.
func content(t *testing.T, raw json.RawMessage) string {
	m := payload(t, raw)
	if c, ok := m["content"].(string); ok {
		return c
	}
	if txt, ok := m["text"].(map[string]any); ok {
		return txt["content"].(string)
	}
	if card, ok := m["template_card"].(map[string]any); ok { // a card's text
		return card["sub_title_text"].(string)
	}
	t.Fatalf("no content in %s", raw)
	return ""
}

func TestExampleDailyReport(t *testing.T) {
	t.Parallel()
	s := examples(t)
	ctx := context.Background()

	// 09:00 in each salesperson's own zone: Shanghai, Berlin (chenjing)
	// and New York (zhaolei) each have their run.
	at := mustTime(t, "2026-12-01T09:00:00+08:00")
	res, err := s.Preview(ctx, "daily_report", at, nil)
	require.NoError(t, err)
	require.True(t, res.IsSlot)
	require.True(t, res.PerRecipient)
	require.ElementsMatch(t, salespeople, recipientsOf(res))
	require.True(t, slices.IsSortedFunc(res.Deliveries, func(a, b PreviewDelivery) int { return a.At.Compare(b.At) }), "listed in the order they go")
	require.Len(t, res.Zones, 3)
	slots := map[string]time.Time{}
	for _, z := range res.Zones {
		require.True(t, z.IsSlot, z.Zone)
		require.Equal(t, "2026-12-01 09:00", z.Slot.Format("2006-01-02 15:04"), z.Zone)
		require.Equal(t, engine.ZoneRunKey("daily_report", z.Zone, z.Slot), z.RunKey)
		slots[z.Zone] = z.Slot
	}
	require.Equal(t, "2026-12-01T09:00:00+01:00", slots["Europe/Berlin"].Format(time.RFC3339))
	require.Equal(t, "2026-12-01T09:00:00-05:00", slots["America/New_York"].Format(time.RFC3339))
	for _, d := range res.Deliveries {
		p, _ := s.cur.Load().people.Get(d.Recipient)
		require.Equal(t, "markdown", payload(t, d.Payload)["msgtype"])
		require.Contains(t, content(t, d.Payload), p.Name)
		require.Contains(t, content(t, d.Payload), "2026-12-01 日报")
		require.Contains(t, content(t, d.Payload), d.Zone)
		require.GreaterOrEqual(t, d.Offset, time.Second)
		require.Less(t, d.Offset, 5*time.Minute)
		require.Equal(t, p.Timezone, d.Zone)
		require.True(t, d.At.Equal(slots[d.Zone].Add(d.Offset)))
		require.Equal(t, "09:0", d.At.Format("15:04")[:4], "09:00 local (plus stagger) for %s", d.Recipient)
		require.Empty(t, d.Deferred, "09:00 is outside quiet hours")
		require.Equal(t, engine.DeliveryID(engine.LocalSlotKey("daily_report", slots[d.Zone], d.Zone), d.Recipient), d.ID)
	}

	// National Day: a statutory holiday, so no slot and nobody.
	res, err = s.Preview(ctx, "daily_report", mustTime(t, "2026-10-01T09:00:00+08:00"), nil)
	require.NoError(t, err)
	require.False(t, res.IsSlot)
	require.Empty(t, res.Deliveries)
	require.Contains(t, res.Reason, "not a workday")
	require.Contains(t, res.Reason, "国庆节")
	require.True(t, res.NextSlot.Equal(mustTime(t, "2026-10-08T09:00:00+08:00")), res.NextSlot)

	// Saturday 10 October 2026 is a make-up workday (调休): everyone.
	res, err = s.Preview(ctx, "daily_report", mustTime(t, "2026-10-10T09:00:00+08:00"), nil)
	require.NoError(t, err)
	require.True(t, res.IsSlot)
	require.ElementsMatch(t, salespeople, recipientsOf(res))

	// An ordinary Saturday: nobody.
	res, err = s.Preview(ctx, "daily_report", mustTime(t, "2026-12-05T09:00:00+08:00"), nil)
	require.NoError(t, err)
	require.Empty(t, res.Deliveries)
	require.Contains(t, res.Reason, "Saturday")

	// Not 09:00: nobody, and the reason names the schedule.
	res, err = s.Preview(ctx, "daily_report", mustTime(t, "2026-12-01T10:00:00+08:00"), nil)
	require.NoError(t, err)
	require.Empty(t, res.Deliveries)
	require.Contains(t, res.Reason, "not a slot")

	// Compensation: yesterday's failed reminder is carried by today's.
	out, err := s.Plan(ctx, "daily_report", engine.RunContext{
		Rule: "daily_report", Key: "k", Slot: at,
		Missed: map[string][]string{"wangfang": {"2026-11-30T09:00:00+08:00"}},
	})
	require.NoError(t, err)
	for _, p := range out {
		has := strings.Contains(content(t, p.Payload), "补发：11-30")
		require.Equal(t, p.Recipient == "wangfang", has, p.Recipient)
	}
}

func TestExampleWeeklyReport(t *testing.T) {
	t.Parallel()
	s := examples(t)
	ctx := context.Background()
	// Monday 5 October 2026 is in the National Day holiday: the slot moves
	// to the next workday, Thursday 8 October.
	res, err := s.Preview(ctx, "weekly_report", mustTime(t, "2026-10-05T09:00:00+08:00"), nil)
	require.NoError(t, err)
	require.False(t, res.IsSlot)
	require.Contains(t, res.Reason, "moves to the next workday")
	require.True(t, res.NextSlot.Equal(mustTime(t, "2026-10-08T09:00:00+08:00")), res.NextSlot)

	res, err = s.Preview(ctx, "weekly_report", res.NextSlot, nil)
	require.NoError(t, err)
	require.True(t, res.IsSlot)
	require.ElementsMatch(t, []string{"zhangwei", "lina", "sunli"}, recipientsOf(res), "every manager, and only managers")
	for _, d := range res.Deliveries {
		require.Contains(t, content(t, d.Payload), "顺延")
	}

	res, err = s.Preview(ctx, "weekly_report", mustTime(t, "2026-11-30T09:00:00+08:00"), nil)
	require.NoError(t, err)
	require.True(t, res.IsSlot)
	byID := map[string]string{}
	for _, d := range res.Deliveries {
		byID[d.Recipient] = content(t, d.Payload)
		require.Contains(t, []time.Duration{time.Second, 2*time.Minute + time.Second}, d.Offset) // two waves, off the :00 mark
	}
	require.Contains(t, byID["lina"], "请汇总团队上周（2026-11-23 起）的周报")
	require.Contains(t, byID["lina"], "团队 4 人：王芳、刘洋、陈静、赵磊")
	require.Contains(t, byID["sunli"], "团队 1 人：周强")
	require.NotContains(t, byID["lina"], "顺延")

	// With a WeCom directory: a person who moves team is in the new
	// manager's report.
	snap, err := (&DirectorySnapshot{Source: "wecom:test", People: []DirectoryPerson{
		{UserID: "liuyang", Departments: []string{"ops"}, Manager: "sunli"},
		{UserID: "sunli", Departments: []string{"ops"}},
		{UserID: "newbie", Name: "新人", Departments: []string{"ops"}, Manager: "sunli"},
	}}).EncodeJSON()
	require.NoError(t, err)
	require.NoError(t, s.SetDirectory(snap))
	res, err = s.Preview(ctx, "weekly_report", mustTime(t, "2026-11-30T09:00:00+08:00"), nil)
	require.NoError(t, err)
	require.Equal(t, DirectoryHash(snap), res.DirectoryHash)
	byID = map[string]string{}
	for _, d := range res.Deliveries {
		byID[d.Recipient] = content(t, d.Payload)
	}
	require.Contains(t, byID["lina"], "团队 4 人", "the people file wins for liuyang: its manager stays lina")
	require.Contains(t, byID["sunli"], "团队 2 人：周强、新人", "a person only WeCom knows joins the team")
}

func TestExampleBirthday(t *testing.T) {
	t.Parallel()
	s := examples(t)
	ctx := context.Background()
	r := ruleNamed(t, s, "birthday")
	require.Equal(t, heraldtype.PriorityHigh, r.Priority)
	require.Equal(t, 4*time.Hour, r.Deadline)

	at := func(date string) time.Time { return mustTime(t, date+"T08:00:00+08:00") }
	who := func(date string) []string {
		res, err := s.Preview(ctx, "birthday", at(date), nil)
		require.NoError(t, err)
		require.True(t, res.IsSlot)
		require.True(t, res.Deadline.Equal(at(date).Add(4*time.Hour)), "deadline noon")
		return recipientsOf(res)
	}
	require.Equal(t, []string{"chenjing"}, who("2026-12-01"))
	// 29 February: greeted on 28 February in other years, on the 29th in leap years.
	require.Equal(t, []string{"wangfang"}, who("2027-02-28"))
	require.Empty(t, who("2028-02-28"))
	require.Equal(t, []string{"wangfang"}, who("2028-02-29"))
	// Lunar 八月十五 fell on 25 September 2026.
	res, err := s.Preview(ctx, "birthday", at("2026-09-25"), nil)
	require.NoError(t, err)
	require.Equal(t, []string{"liuyang"}, recipientsOf(res))
	require.Contains(t, content(t, res.Deliveries[0].Payload), "农历八月十五")
	// A leap-month birthday (闰六月初十): in 2025, which has 闰六月, on that day.
	leap, ok := calendar.SolarOfLunar(2025, 6, 10, true)
	require.True(t, ok)
	require.Equal(t, []string{"zhaolei"}, who(leap.String()))
	regular, _ := calendar.SolarOfLunar(2025, 6, 10, false)
	require.Empty(t, who(regular.String()))
}

func TestExampleFollowUp(t *testing.T) {
	t.Parallel()
	s := examples(t)
	r := ruleNamed(t, s, "follow_up")
	require.Empty(t, r.Schedule, "triggered by API tasks")
	out, err := plan(t, s, "follow_up", `{"owner":"wangfang","customer":"华东机电","note":"确认报价"}`)
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, "wangfang", out[0].Recipient)
	card := payload(t, out[0].Payload)["template_card"].(map[string]any)
	require.Equal(t, "button_interaction", card["card_type"])
	require.Contains(t, card["sub_title_text"], "王芳，请跟进客户「华东机电」：确认报价")

	out, err = plan(t, s, "follow_up", `{"owner":"wangfang","customer":"华东机电","note":"确认报价","overdue":true}`)
	require.NoError(t, err)
	require.Len(t, out, 2)
	require.Equal(t, "lina", out[1].Recipient)
	require.Contains(t, content(t, out[1].Payload), "【逾期】王芳")

	_, err = plan(t, s, "follow_up", `{}`)
	require.ErrorContains(t, err, "follow_up needs data.owner")
}

func TestExampleEnquiryTimeout(t *testing.T) {
	t.Parallel()
	s := examples(t)
	for level, want := range map[int][]string{
		1: {"liuyang"},
		2: {"liuyang", "lina"},
		3: {"liuyang", "lina", "zhangwei"},
		4: {"liuyang", "lina", "zhangwei"}, // nobody above the director
	} {
		data := `{"enquiry":"8812","customer":"华东机电","assignee":"liuyang","level":` + string(rune('0'+level)) + `,"waited":"30m"}`
		out, err := plan(t, s, "enquiry_timeout", data)
		require.NoError(t, err)
		var got []string
		for _, p := range out {
			got = append(got, p.Recipient)
		}
		require.Equal(t, want, got, "level %d", level)
		if level > 1 {
			require.Contains(t, content(t, out[1].Payload), "【升级 L")
		}
		require.Contains(t, content(t, out[0].Payload), "#8812（华东机电）已 30m 无人回复")
	}
}

func TestExampleOpsAlert(t *testing.T) {
	t.Parallel()
	s := examples(t)
	out, err := plan(t, s, "ops_alert", `{"kind":"delivery_failed","severity":"warning","rule":"daily_report","recipient":"wangfang","message":"errcode 60020"}`)
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, "sunli", out[0].Recipient)
	c := content(t, out[0].Payload)
	require.Contains(t, c, "`delivery_failed`")
	require.Contains(t, c, "> rule: daily_report")
	require.Contains(t, c, "> message: errcode 60020")

	out, err = plan(t, s, "ops_alert", `{"kind":"channel_config","severity":"critical"}`)
	require.NoError(t, err)
	require.Len(t, out, 2)
}

func TestExampleDemo(t *testing.T) {
	t.Parallel()
	s := examples(t)
	r := ruleNamed(t, s, "demo")
	require.Equal(t, "mock", r.Channel)
	now := time.Date(2026, 12, 1, 9, 0, 7, 0, time.UTC)
	next, ok := s.Schedule("demo").Next(now)
	require.True(t, ok)
	require.LessOrEqual(t, next.Sub(now), 30*time.Second)
	res, err := s.Preview(context.Background(), "demo", next, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"wangfang", "liuyang"}, recipientsOf(res))
	require.Contains(t, content(t, res.Deliveries[0].Payload), "17:00:30")
}

func ruleNamed(t *testing.T, s *Set, name string) engine.Rule {
	t.Helper()
	for _, r := range s.Rules() {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no rule %q", name)
	return engine.Rule{}
}

// TestExamplePreviewTaskRules: a rule triggered by API tasks previews with
// a task's data, and says so when it is given none.
func TestExamplePreviewTaskRules(t *testing.T) {
	t.Parallel()
	s := examples(t)
	ctx := context.Background()
	at := mustTime(t, "2026-12-01T10:15:00+08:00")
	res, err := s.Preview(ctx, "enquiry_timeout", at, []byte(`{"enquiry":"8812","customer":"华东机电","assignee":"liuyang","level":2,"waited":"30m"}`))
	require.NoError(t, err)
	require.True(t, res.IsSlot)
	require.Equal(t, "api task", res.Trigger)
	require.Equal(t, engine.TaskRunKey(PreviewTaskKey), res.RunKey)
	require.True(t, res.Deadline.Equal(at.Add(30*time.Minute)))
	require.Equal(t, []string{"liuyang", "lina"}, recipientsOf(res))
	require.Equal(t, "刘洋", res.Deliveries[0].Name)
	require.Contains(t, content(t, res.Deliveries[1].Payload), "【升级 L2】客户咨询 #8812（华东机电）已 30m 无人回复")
	for _, d := range res.Deliveries {
		require.True(t, d.At.Equal(at), "no stagger")
		require.Equal(t, engine.DeliveryID(res.RunKey, d.Recipient), d.ID)
	}

	res, err = s.Preview(ctx, "enquiry_timeout", at, nil)
	require.NoError(t, err)
	require.Empty(t, res.Deliveries)
	require.Contains(t, res.Reason, "rule enquiry_timeout fires by API tasks: preview it with a task's data")

	_, err = s.Preview(ctx, "follow_up", at, nil)
	require.ErrorIs(t, err, ErrRule)
	require.ErrorContains(t, err, "follow_up needs data.owner (rule follow_up fires by API tasks")
	_, err = s.Preview(ctx, "follow_up", at, []byte(`{}`))
	require.ErrorContains(t, err, "follow_up needs data.owner")
	require.NotContains(t, err.Error(), "fires by API tasks", "data was given")

	for data, want := range map[string]string{`[1]`: "not an array", `"x"`: "not a string", `{"owner":`: "not valid JSON", `7`: "not a number"} {
		_, err = s.Preview(ctx, "follow_up", at, []byte(data))
		require.ErrorIs(t, err, ErrPreviewData, data)
		require.ErrorContains(t, err, want, data)
	}

	res, err = s.Preview(ctx, "follow_up", at, []byte(`{"owner":"wangfang","customer":"华东机电","note":"确认报价","undelivered":true}`))
	require.NoError(t, err)
	require.Equal(t, []string{"lina"}, recipientsOf(res))
	require.Contains(t, content(t, res.Deliveries[0].Payload), "【未送达】")
	// An owner without a manager: nobody, and no error.
	res, err = s.Preview(ctx, "follow_up", at, []byte(`{"owner":"zhangwei","customer":"华东机电","undelivered":true}`))
	require.NoError(t, err)
	require.Empty(t, res.Deliveries)
}
