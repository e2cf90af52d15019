package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api/reply"
)

// fireZones fires a slot of a per-recipient rule (timezone = "recipient")
// by hand: one run per zone, with the keys the scheduler would use
// (engine.ZoneRunKey), so a zone's slot still fires once whoever fires it
// first. A given slot is an instant: it fires the zones whose schedule has
// a slot then (09:00 CET fires Berlin and Paris, not Shanghai). Now fires
// every zone.
func (s *server) fireZones(w http.ResponseWriter, r *http.Request, rule engine.Rule, slot time.Time, now bool, at time.Time, by fireBy) {
	zones := rule.FireZones()
	if !now && s.cfg.ScheduleFunc != nil {
		var match []string
		for _, z := range zones {
			rz := rule
			rz.Timezone = z
			sched, err := s.cfg.ScheduleFunc(rz)
			if err != nil {
				writeFieldError(w, &FieldError{"rule", fmt.Sprintf("rule %s: its schedule in %s does not build: %v", rule.Name, z, err)})
				return
			}
			if next, ok := sched.Next(slot.Add(-time.Nanosecond)); ok && next.Equal(slot) {
				match = append(match, z)
			}
		}
		if len(match) == 0 {
			writeFieldError(w, &FieldError{"slot", fmt.Sprintf("%s is not a slot of rule %s (%s in each recipient's zone) in any of its zones (%s)",
				slot.Format(time.RFC3339Nano), rule.Name, rule.Schedule, strings.Join(zones, ", "))})
			return
		}
		zones = match
	}
	res := FireResponse{Rule: rule.Name, Slot: slot}
	var exists []string
	for _, z := range zones {
		c := engine.ManualRun(rule, z, slot, s.cfg.Rules.Hash(), at)
		c.Token = firedToken(r, rule)
		backfilled, err := s.startManual(r.Context(), c, by)
		if backfilled != "" {
			res.Backfilled = backfilled
		}
		switch {
		case errors.Is(err, engine.ErrRunExists):
			exists = append(exists, c.Key)
		case err != nil:
			s.writeFireError(w, err, rule.Name, now)
			return
		default:
			res.Runs = append(res.Runs, c.Key)
		}
	}
	if len(res.Runs) == 0 {
		writeJSON(w, http.StatusConflict, reply.With(
			fmt.Sprintf("slot %s of rule %s already fired in every zone it names (%s)", slot.Format(time.RFC3339), rule.Name, strings.Join(exists, ", ")),
			map[string]any{"run": exists[0]}))
		return
	}
	res.Run = res.Runs[0]
	_, res.Paused = s.cfg.FSM.Paused(rule.Name)
	writeJSON(w, http.StatusCreated, res)
}
