package rules

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

func TestPeopleTimeFieldErrors(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		fields string
		want   string
	}{
		"default_zone_alone":   {`default_timezone = "Europe/Berlin",`, `default_timezone needs timezone = "recipient"`},
		"default_zone_bad":     {"timezone = \"recipient\",\n  default_timezone = \"Mars/Base\",", `unknown default_timezone "Mars/Base"`},
		"every_recipient":      {"schedule = \"@every 30m\",\n  timezone = \"recipient\",", "not tied to a time of day"},
		"quiet_not_table":      {`quiet_hours = "22:00-08:00",`, "quiet_hours: want { from"},
		"quiet_bad_time":       {`quiet_hours = { from = "22:00", to = "8am" },`, `quiet hours to "8am"`},
		"quiet_same":           {`quiet_hours = { from = "22:00", to = "22:00" },`, "must differ"},
		"quiet_missing_to":     {`quiet_hours = { from = "22:00" },`, "both from and to are required"},
		"quiet_unknown":        {`quiet_hours = { from = "22:00", to = "08:00", zone = "x" },`, `unknown field "zone"`},
		"strict_not_bool":      {`quiet_hours_strict = "yes",`, "want true or false"},
		"digest_no_window":     {`digest = { message = function(to, items) return {} end },`, "window is required"},
		"digest_no_message":    {`digest = { window = "10m" },`, "message is required"},
		"digest_bad_window":    {`digest = { window = "soon", message = function() end },`, "digest.window"},
		"digest_past_deadline": {"deadline = \"10m\",\n  digest = { window = \"10m\", message = function() end },", "shorter than the rule's deadline"},
		"digest_msg_type":      {`digest = { window = "10m", message = "x" },`, "want a function(to, items)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			errs := Check(newDir(t, map[string]string{"z_bad.lua": ruleWith(c.fields)}))
			require.Len(t, errs, 1, "%v", errs)
			require.Equal(t, 3+strings.Count(c.fields, "\n"), errs[0].Line, errs[0].String())
			require.Contains(t, errs[0].Message, c.want)
		})
	}
	errs := Check(newDir(t, map[string]string{"people.csv": "userid,quiet_hours\nann,22-08\n"}))
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].String(), "people.csv:2")
	require.Contains(t, errs[0].Message, "quiet hours")
}

const zonedPeople = "userid,name,timezone,quiet_hours\n" +
	"sh,Shanghai,Asia/Shanghai,\n" +
	"ber,Berlin,Europe/Berlin,\n" +
	"ny,New York,America/New_York,23:00-07:00\n" +
	"none,No zone,,off\n"

const localRule = `return rule {
  name = "local",
  schedule = "0 9 * * *",
  timezone = "recipient",
  default_timezone = "Europe/London",
  channel = "mock",
  quiet_hours = { from = "22:00", to = "08:00" },
  recipients = function(run) return people.all() end,
  message = function(run, to)
    return { msgtype = "text", content = to.userid .. " " .. run.slot .. " " .. run.zone }
  end,
}
`

func TestRecipientZones(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{"people.csv": zonedPeople, "local.lua": localRule}))
	r := ruleNamed(t, s, "local")
	require.True(t, r.PerRecipient)
	require.Equal(t, "Europe/London", r.Timezone, "the zone of people who name none")
	require.Equal(t, []string{"America/New_York", "Asia/Shanghai", "Europe/Berlin", "Europe/London"}, r.Zones)

	// Each zone's run plans the people of that zone only, each with their
	// zone and quiet window.
	ctx := context.Background()
	for zone, want := range map[string]string{
		"Asia/Shanghai": "sh", "Europe/Berlin": "ber", "America/New_York": "ny", "Europe/London": "none",
	} {
		loc := location(zone)
		slot := time.Date(2026, 12, 1, 9, 0, 0, 0, loc)
		out, err := s.Plan(ctx, "local", engine.RunContext{Rule: "local", Key: engine.ZoneRunKey("local", zone, slot), Slot: slot, Zone: zone})
		require.NoError(t, err)
		require.Len(t, out, 1, zone)
		require.Equal(t, want, out[0].Recipient)
		require.Equal(t, zone, out[0].Zone)
		require.Contains(t, string(out[0].Payload), slot.Format(time.RFC3339)+" "+zone, "run.slot and run.zone are local")
		switch want {
		case "ny":
			require.Equal(t, "23:00–07:00", out[0].Quiet.String(), "their own")
		case "none":
			require.True(t, out[0].Quiet.IsZero(), "off")
		default:
			require.Equal(t, "22:00–08:00", out[0].Quiet.String(), "the rule's")
		}
	}

	res, err := s.Preview(ctx, "local", mustTime(t, "2026-12-01T09:00:00Z"), nil)
	require.NoError(t, err)
	require.True(t, res.IsSlot)
	require.Len(t, res.Zones, 4)
	got := map[string]string{}
	for _, d := range res.Deliveries {
		got[d.Recipient] = d.At.Format(time.RFC3339) + " " + d.Zone
	}
	require.Equal(t, map[string]string{
		"sh":   "2026-12-01T09:00:00+08:00 Asia/Shanghai",
		"ber":  "2026-12-01T09:00:00+01:00 Europe/Berlin",
		"ny":   "2026-12-01T09:00:00-05:00 America/New_York",
		"none": "2026-12-01T09:00:00Z Europe/London",
	}, got)
	require.Equal(t, []string{"sh", "ber", "none", "ny"}, recipientsOf(res), "in the order they go")
}

func TestPreviewShowsQuietHold(t *testing.T) {
	t.Parallel()
	rule := strings.Replace(localRule, `schedule = "0 9 * * *"`, "schedule = \"30 23 * * *\",\n  deadline = \"12h\"", 1)
	s := load(t, newDir(t, map[string]string{"people.csv": zonedPeople, "local.lua": rule}))
	res, err := s.Preview(context.Background(), "local", mustTime(t, "2026-12-01T23:30:00Z"), nil)
	require.NoError(t, err)
	held := map[string]string{}
	for _, d := range res.Deliveries {
		held[d.Recipient] = d.At.Format(time.RFC3339) + " " + d.Deferred
		require.False(t, d.Expires)
	}
	require.Equal(t, "2026-12-02T08:00:00+08:00 quiet hours 22:00–08:00 Asia/Shanghai until 2026-12-02T08:00:00+08:00", held["sh"])
	require.Equal(t, "2026-12-02T07:00:00-05:00 quiet hours 23:00–07:00 America/New_York until 2026-12-02T07:00:00-05:00", held["ny"])
	require.Equal(t, "2026-12-01T23:30:00Z ", held["none"], "quiet_hours off")

	// With the default deadline of 2h, the window outlasts it: the
	// message would expire at its deadline, and preview says so.
	s = load(t, newDir(t, map[string]string{"people.csv": zonedPeople,
		"local.lua": strings.Replace(localRule, `schedule = "0 9 * * *"`, `schedule = "30 23 * * *"`, 1)}))
	res, err = s.Preview(context.Background(), "local", mustTime(t, "2026-12-01T23:30:00Z"), nil)
	require.NoError(t, err)
	for _, d := range res.Deliveries {
		require.Equal(t, d.Recipient != "none", d.Expires, d.Recipient)
		if d.Expires {
			require.Equal(t, "01:30", d.At.Format("15:04"), "looked at, and expired, at its deadline")
		}
	}
}

// TestFollowUpDigest: 30 customers due for one owner at 09:00 are one
// message listing all 30, built by the example's digest.message.
func TestFollowUpDigest(t *testing.T) {
	t.Parallel()
	s := examples(t)
	r := ruleNamed(t, s, "follow_up")
	require.Equal(t, 10*time.Minute, r.Digest)
	nine := mustTime(t, "2026-12-01T09:00:00+08:00")
	var items []engine.DigestItem
	for i := range 30 {
		data := fmt.Sprintf(`{"owner":"wangfang","customer":"客户%02d","note":"确认报价"}`, i+1)
		out, err := s.Plan(context.Background(), "follow_up", engine.RunContext{Rule: "follow_up", Key: fmt.Sprintf("task:f-%d", i), Slot: nine, Zone: "Asia/Shanghai", Data: []byte(data)})
		require.NoError(t, err)
		require.Len(t, out, 1)
		require.Equal(t, "22:00–08:00", out[0].Quiet.String())
		items = append(items, engine.DigestItem{ID: fmt.Sprint(i), RunKey: fmt.Sprintf("task:f-%d", i), Slot: nine, Zone: "Asia/Shanghai", Data: []byte(data), Payload: out[0].Payload})
	}
	msg, err := s.Digest(context.Background(), "follow_up", "wangfang", items)
	require.NoError(t, err)
	c := content(t, msg)
	require.Contains(t, c, "王芳，30 位客户待跟进")
	for i := range 30 {
		require.Contains(t, c, fmt.Sprintf("%d. 客户%02d：确认报价", i+1, i+1))
	}
	_, err = s.Digest(context.Background(), "daily_report", "wangfang", items)
	require.ErrorContains(t, err, "no digest")
}

// TestPreviewTasksShowsDigests: 30 tasks for wangfang and one for lina at
// 09:00 preview as 31 messages and the one digest wangfang would get.
func TestPreviewTasksShowsDigests(t *testing.T) {
	t.Parallel()
	s := examples(t)
	var data []json.RawMessage
	for i := range 30 {
		data = append(data, json.RawMessage(fmt.Sprintf(`{"owner":"wangfang","customer":"客户%02d"}`, i+1)))
	}
	data = append(data, json.RawMessage(`{"owner":"lina","customer":"华东机电"}`))
	nine := mustTime(t, "2026-12-01T09:00:00+08:00")
	res, err := s.PreviewTasks(context.Background(), "follow_up", nine, data)
	require.NoError(t, err)
	require.Len(t, res.Deliveries, 31)
	require.Len(t, res.Digests, 1)
	dg := res.Digests[0]
	require.Equal(t, "wangfang", dg.Recipient)
	require.Len(t, dg.Members, 30)
	require.True(t, dg.At.Equal(nine.Add(10*time.Minute)))
	require.Equal(t, engine.DigestID("follow_up", "wangfang", dg.Members), dg.ID)
	require.Contains(t, content(t, dg.Payload), "30. 客户30：按约定跟进")

	_, err = s.PreviewTasks(context.Background(), "follow_up", nine, []json.RawMessage{json.RawMessage(`{"owner":"lina"}`), json.RawMessage(`[1]`)})
	require.ErrorIs(t, err, ErrPreviewData)
	_, err = s.PreviewTasks(context.Background(), "daily_report", nine, data[:2])
	require.ErrorContains(t, err, "has a schedule")
}

// TestLocalZoneRefused: "Local" is each machine's own zone. In a people
// file it made a per-recipient rule fire in zone "Local", which the
// engine's schedule refuses, so the rule stopped firing for everybody; in
// time.in_zone it made leaders write different times.
func TestLocalZoneRefused(t *testing.T) {
	t.Parallel()
	errs := Check(newDir(t, map[string]string{"people.csv": "userid,timezone\nann,Asia/Shanghai\nbob,Local\n"}))
	require.Len(t, errs, 1, "%v", errs)
	require.Contains(t, errs[0].String(), "people.csv:3")
	require.Contains(t, errs[0].Message, "Local")

	s := load(t, newDir(t, map[string]string{
		"in_zone.lua": simpleRule("in_zone", `return { time.in_zone(time.now(), "Local"):format("15:04") }`),
		"parse.lua":   simpleRule("parse", `return { tostring(time.parse("2026-12-01 09:00", nil, "Local")) }`),
	}))
	for _, name := range []string{"in_zone", "parse"} {
		_, err := plan(t, s, name, "")
		require.Error(t, err, name)
		require.Contains(t, err.Error(), `"Local"`, name)
	}
}

// TestPreviewZonesAcrossDST: a per-recipient rule's preview puts each
// zone's run where the engine fires it. A wall-clock time in a zone's
// spring-forward gap fires at the gap's end, one in the repeated autumn
// hour at its first occurrence; the preview read both with time.Date
// (03:30 and the second 02:30) and said "not a slot, next slot tomorrow"
// for runs that fire that day.
func TestPreviewZonesAcrossDST(t *testing.T) {
	t.Parallel()
	rule := `return rule {
  name = "night", schedule = "30 2 * * *", timezone = "recipient", channel = "mock",
  recipients = function(run) return people.all() end,
  message = function(run, to) return { msgtype = "text", content = run.slot } end,
}`
	s := load(t, newDir(t, map[string]string{"people.csv": "userid,timezone\nny,America/New_York\nber,Europe/Berlin\n", "night.lua": rule}))
	for _, c := range []struct{ at, zone, slot string }{
		{"2026-03-08T02:30:00+08:00", "America/New_York", "2026-03-08T03:00:00-04:00"}, // gap
		{"2026-03-29T02:30:00+08:00", "Europe/Berlin", "2026-03-29T03:00:00+02:00"},    // gap
		{"2026-10-25T02:30:00+08:00", "Europe/Berlin", "2026-10-25T02:30:00+02:00"},    // repeat: the first
		{"2026-11-01T02:30:00+08:00", "America/New_York", "2026-11-01T02:30:00-05:00"}, // after the repeat: plain
	} {
		res, err := s.Preview(context.Background(), "night", mustTime(t, c.at), nil)
		require.NoError(t, err)
		var z PreviewZone
		for _, pz := range res.Zones {
			if pz.Zone == c.zone {
				z = pz
			}
		}
		require.True(t, z.IsSlot, "%s in %s: %s", c.at, c.zone, z.Reason)
		require.True(t, mustTime(t, c.slot).Equal(z.Slot), "%s in %s: slot %s", c.at, c.zone, z.Slot)
		require.Equal(t, 1, z.Recipients)
	}
}

// TestZoneRunSurvivesRuleEdit: a run keeps the shape it was started with.
// A zone's run (RULE@SLOT@ZONE) started before its rule was edited to one
// zone for everybody planned everybody, so people of other zones got that
// day's message twice; a plain run started before the rule became
// per-recipient planned only the people of its zone, and the others
// missed the slot.
func TestZoneRunSurvivesRuleEdit(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"people.csv": zonedPeople, "local.lua": localRule})
	s := load(t, dir)
	ber := location("Europe/Berlin")
	slot := time.Date(2026, 12, 1, 9, 0, 0, 0, ber)
	zoneRun := engine.RunContext{Rule: "local", Key: engine.ZoneRunKey("local", "Europe/Berlin", slot), Slot: slot, Zone: "Europe/Berlin"}

	writeFiles(t, dir, map[string]string{"local.lua": strings.Replace(localRule, `timezone = "recipient",
  default_timezone = "Europe/London",`, `timezone = "Europe/London",`, 1)})
	_, err := s.Reload()
	require.NoError(t, err)
	require.False(t, ruleNamed(t, s, "local").PerRecipient)
	out, err := s.Plan(context.Background(), "local", zoneRun)
	require.NoError(t, err)
	require.Equal(t, []string{"ber"}, plannedIDs(out), "the zone's run plans its zone's people only")

	writeFiles(t, dir, map[string]string{"local.lua": localRule})
	_, err = s.Reload()
	require.NoError(t, err)
	london := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	out, err = s.Plan(context.Background(), "local", engine.RunContext{Rule: "local", Key: engine.RunKey("local", london), Slot: london, Zone: "Europe/London"})
	require.NoError(t, err)
	require.Len(t, out, 4, "a plain run plans everybody")
}

// TestPreviewZonesReadTheTypedClock: `herald rules preview daily_report
// --tz Europe/Berlin --at "2026-12-01 09:00"` asks about 09:00. The
// preview read the wall clock after moving the instant to the rule's
// default zone, so every zone was looked at 08:00 London time (16:00 for
// a Shanghai default) and nobody was listed.
func TestPreviewZonesReadTheTypedClock(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{"people.csv": zonedPeople, "local.lua": localRule}))
	for _, zone := range []string{"Europe/Berlin", "America/New_York", "Asia/Shanghai"} {
		at := time.Date(2026, 12, 1, 9, 0, 0, 0, location(zone))
		res, err := s.Preview(context.Background(), "local", at, nil)
		require.NoError(t, err)
		require.True(t, res.IsSlot, "%s: %s", zone, res.Reason)
		require.Len(t, res.Deliveries, 4, zone)
		for _, z := range res.Zones {
			require.Equal(t, "09:00", z.Slot.Format("15:04"), "%s typed, zone %s", zone, z.Zone)
		}
	}
}
