package rules

import (
	"fmt"
	"slices"
	"strings"

	"github.com/heraldhq/herald/engine"
)

// People in their own time: the zone each person is in for a rule, the
// zones a per-recipient rule fires in, and each person's quiet hours.

// fieldQuietHours is the people column with a person's own quiet hours.
const fieldQuietHours = "quiet_hours"

// readQuiet reads the quiet_hours column, which stays an extra field as
// written (rules see the text).
func (p *personFields) readQuiet(f map[string]any) error {
	v, ok := f[fieldQuietHours]
	if !ok || v == nil {
		return nil
	}
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("%s: want HH:MM-HH:MM (like 22:00-08:00) or off, got %v", fieldQuietHours, v)
	}
	q, err := engine.ParseQuietRange(s)
	if err != nil {
		return err
	}
	p.Quiet = &q
	return nil
}

// Zones lists the zones people of the directory name, sorted.
func (d *Directory) Zones() []string {
	if d == nil {
		return nil
	}
	d.zonesOnce.Do(func() {
		seen := map[string]bool{}
		for _, p := range d.people {
			if p.Timezone != "" && !seen[p.Timezone] {
				seen[p.Timezone] = true
				d.zones = append(d.zones, p.Timezone)
			}
		}
		slices.Sort(d.zones)
	})
	return d.zones
}

// ruleZones is where a per-recipient rule fires: its default zone and
// every zone of the directory.
func ruleZones(r engine.Rule, people *Directory) []string {
	zs := append([]string{r.Timezone}, people.Zones()...)
	slices.Sort(zs)
	return slices.Compact(zs)
}

// personZone is the zone recipient userid is in for rule c: their own,
// else the rule's (for a per-recipient rule, its default_timezone).
func (c *compiled) personZone(people *Directory, userid string) string {
	if p, ok := people.Get(userid); ok && p.Timezone != "" {
		return p.Timezone
	}
	return zoneName(c.rule.Timezone)
}

// personQuiet is recipient userid's quiet window for rule c: their own
// when the people file gives one ("off" for none), else the rule's.
func (c *compiled) personQuiet(people *Directory, userid string) engine.QuietHours {
	if p, ok := people.Get(userid); ok && p.Quiet != nil {
		return *p.Quiet
	}
	return c.quiet
}

// isTaskRun reports whether runKey names an API task's run, which goes to
// whom the rule says in one run whatever their zones.
func isTaskRun(runKey string) bool { return strings.HasPrefix(runKey, "task:") }
