package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/calendar"
	"github.com/heraldhq/herald/engine/schedule"
)

// PreviewTaskKey is the task key a preview of a rule triggered by API tasks
// uses for its run key (stagger depends on the run key).
const PreviewTaskKey = "preview"

// ErrPreviewData means the data given to Preview is not a JSON object (an API
// task's data always is; the HTTP API refuses anything else).
var ErrPreviewData = errors.New("task data must be a JSON object")

// noDataHint is added to what a preview of an API-task rule without data
// says: such a rule reads everything from run.data.
const noDataHint = "fires by API tasks: preview it with a task's data (--data '{...}')"

// PreviewResult is a dry run of a rule at one instant: who would receive
// what, and when. Nothing is sent or written.
type PreviewResult struct {
	Rule     string    `json:"rule"`
	File     string    `json:"file"`
	Channel  string    `json:"channel"`
	Priority string    `json:"priority"`
	Trigger  string    `json:"trigger"` // the schedule, or "api task"
	At       time.Time `json:"at"`      // the instant asked about, in the rule's zone
	RunKey   string    `json:"run_key,omitempty"`
	IsSlot   bool      `json:"is_slot"`            // At is a slot of the schedule (always true for API-task rules)
	Reason   string    `json:"reason,omitempty"`   // why nobody would receive anything, when nobody would
	NextSlot time.Time `json:"next_slot,omitzero"` // when At is not a slot: the schedule's next slot after it
	Deadline time.Time `json:"deadline,omitzero"`  // messages not sent by then expire
	// RulesHash and DirectoryHash name the rule set and the directory
	// snapshot the preview used ("" when no snapshot is in force): a run
	// records the same two, so a preview whose hashes equal a run's
	// planned with the same people.
	RulesHash     string `json:"rules_hash"`
	DirectoryHash string `json:"directory_hash,omitempty"`
	// DirectoryPeople is how many people the snapshot holds.
	DirectoryPeople int `json:"directory_people,omitempty"`
	// PerRecipient: the rule fires in each recipient's own zone; Zones
	// says what each zone's run would be at the wall-clock time asked
	// about (in the zone it was given in, not At's).
	PerRecipient bool          `json:"per_recipient,omitempty"`
	Zones        []PreviewZone `json:"zones,omitempty"`
	// Digest is the rule's digest window: messages go at the end of their
	// window, several to one person folded into one.
	Digest     time.Duration     `json:"digest,omitempty"`
	Deliveries []PreviewDelivery `json:"deliveries"`
	// Digests are what a digest rule would send instead of several of
	// Deliveries (PreviewTasks only).
	Digests []PreviewDigest `json:"digests,omitempty"`
}

// PreviewZone is one zone's run of a per-recipient rule.
type PreviewZone struct {
	Zone       string    `json:"zone"`
	Slot       time.Time `json:"slot"` // the wall-clock time asked about, in Zone (as its schedule reads it across DST)
	RunKey     string    `json:"run_key,omitempty"`
	IsSlot     bool      `json:"is_slot"`
	Reason     string    `json:"reason,omitempty"` // why not, when it is not a slot
	Recipients int       `json:"recipients"`
}

// PreviewDelivery is one recipient's message.
type PreviewDelivery struct {
	ID        string          `json:"id"`
	Recipient string          `json:"recipient"`
	Name      string          `json:"name,omitempty"`
	Zone      string          `json:"zone"`              // the recipient's zone; At is in it
	At        time.Time       `json:"at"`                // when it may go: slot + stagger, deferred past quiet hours, at the end of its digest window
	Offset    time.Duration   `json:"offset"`            // stagger offset
	Deferred  string          `json:"held,omitempty"`    // why quiet hours deferred it (the JSON name is the contract)
	Expires   bool            `json:"expires,omitempty"` // deferred past its deadline: it would expire, with an alert
	Payload   json.RawMessage `json:"payload"`
}

// Preview evaluates rule name as if it ran at at, with data as an API
// task's data. For a scheduled rule whose schedule has no slot at at (a
// statutory holiday for a cn_workday rule, say), nobody is listed and
// Reason says why. An API-task rule previews with run key
// task:preview; its data must be a JSON object (ErrPreviewData), and a
// preview of it without data says that data is what it is missing.
func (s *Set) Preview(ctx context.Context, name string, at time.Time, data json.RawMessage) (PreviewResult, error) {
	v := s.cur.Load()
	c, ok := v.rules[name]
	if !ok {
		return PreviewResult{}, fmt.Errorf("%w %q", ErrUnknownRule, name)
	}
	if err := checkPreviewData(data); err != nil {
		return PreviewResult{}, err
	}
	r := c.rule
	loc, err := loadZone(zoneName(r.Timezone))
	if err != nil {
		return PreviewResult{}, err
	}
	wall := at // the clock as the caller gave it: a per-recipient rule's zones are read at it
	at = at.In(loc)
	res := PreviewResult{
		Rule: r.Name, File: c.file, Channel: r.Channel, Priority: r.Priority.String(),
		Trigger: "api task", At: at, IsSlot: true, Deliveries: []PreviewDelivery{},
		RulesHash: v.hash, DirectoryHash: v.dirHash,
	}
	if v.dir != nil {
		res.DirectoryPeople = len(v.dir.People)
	}
	res.RunKey = engine.TaskRunKey(PreviewTaskKey)
	if c.sched != nil && r.PerRecipient {
		res.Trigger = fmt.Sprintf("%q in each recipient's zone (default %s)", r.Schedule, zoneName(r.Timezone))
		if r.Calendar != "" {
			res.Trigger += " on " + r.Calendar + " (their local date)"
		}
	} else if c.sched != nil {
		res.Trigger = c.sched.String()
		next, ok := c.sched.Next(at.Add(-time.Nanosecond))
		res.IsSlot = ok && next.Equal(at)
		if !res.IsSlot {
			res.RunKey = ""
			res.Reason = s.notSlotReason(c, c.sched, at)
			if n, ok := c.sched.Next(at); ok {
				res.NextSlot = n
			}
			return res, nil
		}
		res.RunKey = engine.RunKey(r.Name, at)
	}
	deadline := r.Deadline
	if deadline == 0 {
		deadline = engine.DefaultDeadline
	}
	res.Deadline = at.Add(deadline)
	res.Digest = r.Digest
	noData := c.sched == nil && isEmptyData(data)
	if r.PerRecipient && c.sched != nil {
		err = s.previewZones(ctx, v, c, wall, &res)
		res.IsSlot = slices.ContainsFunc(res.Zones, func(z PreviewZone) bool { return z.IsSlot })
		if err == nil && !res.IsSlot {
			// Every zone has its reason; the default zone's speaks for the
			// rule, as for any other rule.
			res.Reason = s.notSlotReason(c, c.sched, at) + "; no zone has a slot at " + wall.Format("2006-01-02 15:04:05") + " local time"
			if n, ok := c.sched.Next(at); ok {
				res.NextSlot = n
			}
			return res, nil
		}
	} else {
		var ds []PreviewDelivery
		ds, err = s.previewRun(ctx, v, c, res.RunKey, at, zoneName(r.Timezone), data)
		res.Deliveries = append(res.Deliveries, ds...)
	}
	if err != nil {
		if noData {
			err = fmt.Errorf("%w (rule %s %s)", err, r.Name, noDataHint)
		}
		return res, err
	}
	// In the order they would go.
	slices.SortStableFunc(res.Deliveries, func(a, b PreviewDelivery) int { return a.At.Compare(b.At) })
	if len(res.Deliveries) == 0 {
		res.Reason = "recipients returned nobody (or message returned nil for everyone)"
		if noData {
			res.Reason += "; rule " + r.Name + " " + noDataHint
		}
	}
	return res, nil
}

// previewRun plans one run of c as the leader would, with the times the
// leader would give each message.
func (s *Set) previewRun(ctx context.Context, v *version, c *compiled, runKey string, slot time.Time, zone string, data json.RawMessage) ([]PreviewDelivery, error) {
	r := c.rule
	var msgs []message
	err := s.withSandbox(ctx, v, c.rule.Name, func(sb *sandbox) error {
		var err error
		msgs, err = sb.plan(ctx, c, engine.RunContext{Rule: r.Name, Key: runKey, Slot: slot, Zone: zone, Data: data}, s.cfg.CallTimeout)
		return err
	})
	if err != nil {
		return nil, err
	}
	idKey := runKey
	if r.PerRecipient && !isTaskRun(runKey) {
		idKey = engine.LocalSlotKey(r.Name, slot, zone)
	}
	out := make([]PreviewDelivery, 0, len(msgs))
	for i, m := range msgs {
		t := r.Timing(runKey, slot, engine.Planned{Recipient: m.userid, Zone: m.zone, Quiet: m.quiet}, i, len(msgs), zone)
		out = append(out, PreviewDelivery{
			ID: engine.DeliveryID(idKey, m.userid), Recipient: m.userid, Name: m.name, Zone: m.zone,
			At: t.NotBefore.In(location(m.zone)), Offset: t.Offset, Deferred: t.Deferred, Expires: t.Expires, Payload: m.payload,
		})
	}
	return out, nil
}

// previewZones previews a per-recipient rule at at's wall-clock time (as
// at was given: "09:00" typed in Berlin is 09:00) in each of its zones:
// the run each zone would have, for its people.
func (s *Set) previewZones(ctx context.Context, v *version, c *compiled, at time.Time, res *PreviewResult) error {
	r := c.rule
	res.PerRecipient = true
	res.RunKey = ""
	day := calendar.DateOf(at)
	h, mi, sec := at.Clock()
	for _, zone := range ruleZones(r, v.people) {
		loc := location(zone)
		// As the schedule reads a wall-clock time: in a spring-forward
		// gap, the gap's end; in the repeated autumn hour, the first.
		slot := day.In(loc, h, mi, sec).Add(time.Duration(at.Nanosecond()))
		pz := PreviewZone{Zone: zone, Slot: slot}
		sched, err := schedule.New(schedule.Spec{Cron: r.Schedule, Timezone: zone, Calendar: r.Calendar, Shift: r.Shift}, s.cfg.Calendars)
		if err != nil {
			return err
		}
		next, ok := sched.Next(slot.Add(-time.Nanosecond))
		pz.IsSlot = ok && next.Equal(slot)
		if !pz.IsSlot {
			pz.Reason = s.notSlotReason(c, sched, slot)
			if ok {
				pz.Reason += "; next slot " + next.Format(time.RFC3339)
			}
			res.Zones = append(res.Zones, pz)
			continue
		}
		pz.RunKey = engine.ZoneRunKey(r.Name, zone, slot)
		ds, err := s.previewRun(ctx, v, c, pz.RunKey, slot, zone, nil)
		if err != nil {
			return err
		}
		pz.Recipients = len(ds)
		res.Deliveries = append(res.Deliveries, ds...)
		res.Zones = append(res.Zones, pz)
	}
	return nil
}

// location is zone's *time.Location; zones reaching here were checked
// when the rule or people file loaded.
func location(zone string) *time.Location {
	loc, err := loadZone(zoneName(zone))
	if err != nil {
		return time.UTC
	}
	return loc
}

func isEmptyData(data json.RawMessage) bool {
	d := bytes.TrimSpace(data)
	return len(d) == 0 || bytes.Equal(d, []byte("null"))
}

// checkPreviewData refuses what no API task could carry: data that is not
// a JSON object.
func checkPreviewData(data json.RawMessage) error {
	if isEmptyData(data) {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("%w: not valid JSON: %v", ErrPreviewData, err)
		}
		return fmt.Errorf("%w (rules read it as run.data), not %s", ErrPreviewData, jsonKind(data))
	}
	return nil
}

// jsonKind names the kind of a valid JSON value by its first byte.
func jsonKind(data json.RawMessage) string {
	switch d := bytes.TrimSpace(data); d[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

func zoneName(z string) string {
	if z == "" {
		return "UTC"
	}
	return z
}

// notSlotReason explains why at is not a slot of sched (c's, or one zone's
// of a per-recipient rule): a day off in the rule's
// calendar (with the holiday's name), or simply not a time the cron spec
// names.
func (s *Set) notSlotReason(c *compiled, sched *schedule.Schedule, at time.Time) string {
	r := c.rule
	d := calendar.DateOf(at)
	if r.Calendar != "" {
		if cal, err := s.cfg.Calendars.Lookup(r.Calendar); err == nil && !cal.IsWorkday(d) {
			why := d.Weekday().String()
			if h, ok := calendar.Holiday(d); ok {
				why = "statutory holiday " + h
			}
			msg := fmt.Sprintf("%s is not a workday in calendar %s (%s)", d, r.Calendar, why)
			if r.Shift == "next_workday" {
				msg += "; its slot moves to the next workday"
			}
			return msg
		}
	}
	return fmt.Sprintf("%s is not a slot of schedule %s", at.Format(time.RFC3339), sched)
}
