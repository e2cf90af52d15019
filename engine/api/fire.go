package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api/reply"
)

// FireRequest is the (optional) body of POST /v1/rules/{name}/fire.
type FireRequest struct {
	// Slot is the slot to fire (RFC 3339); empty means now, to the second.
	Slot string `json:"slot,omitempty"`
	// Note is free text for the record (the CLI sends user@host); who
	// fired is the verified caller. By: older clients' Note.
	Note string `json:"note,omitempty"`
	By   string `json:"by,omitempty"`
}

// FireResponse answers a manual fire.
type FireResponse struct {
	Run  string    `json:"run"`
	Rule string    `json:"rule"`
	Slot time.Time `json:"slot"`
	// Runs lists every run started, for a rule that fires in each
	// recipient's zone (one run per zone); Run is the first of them.
	Runs []string `json:"runs,omitempty"`
	// Backfilled is the state the slot was in when it was fired after all
	// ("skipped" or "paused"); empty for a slot that had not fired.
	Backfilled string `json:"backfilled,omitempty"`
	// Paused is true when the rule is paused: the run is planned, and its
	// messages wait until the rule is resumed.
	Paused bool `json:"paused,omitempty"`
}

// fireRule fires a slot of a scheduled rule by hand (a backfill). The run
// key is the same as the scheduler's, so a slot still fires once, whoever
// fires it first; a manual run leaves the rule's cursor alone.
func (s *server) fireRule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.cfg.Rules == nil {
		writeError(w, http.StatusServiceUnavailable, "this node has no rules to fire")
		return
	}
	rule, ok := findRule(s.cfg.Rules, name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no rule named %q is loaded", name))
		return
	}
	if rule.Schedule == "" {
		writeFieldError(w, &FieldError{"rule", fmt.Sprintf("rule %s has no schedule: it fires by API tasks (POST /v1/tasks)", name)})
		return
	}
	var req FireRequest
	if err := decodeBody(w, r, maxFireBody, &req, true, `{"slot": "RFC 3339 time"} (or no body: now)`); err != nil {
		writeFieldError(w, err)
		return
	}
	now := s.now()
	slot := now.Truncate(time.Second)
	if req.Slot != "" {
		t, err := engine.ParseTime(req.Slot, s.zone())
		if err != nil {
			writeFieldError(w, s.badTime("slot", err))
			return
		}
		if t.After(now) {
			writeFieldError(w, &FieldError{"slot", "is in the future; the scheduler fires it on time"})
			return
		}
		if horizon := s.fireHorizon(); now.Sub(t) > horizon {
			writeFieldError(w, &FieldError{"slot", fmt.Sprintf(
				"is more than %d days ago: the ledger forgets fired slots after that, so Herald cannot tell whether it fired", int(horizon.Hours()/24))})
			return
		}
		if !rule.PerRecipient {
			if err := s.checkSlot(rule, t); err != nil {
				writeFieldError(w, err)
				return
			}
		}
		slot = t
	}
	if rule.PerRecipient {
		s.fireZones(w, r, rule, slot, req.Slot == "", now, fireBy{actor(r), s.note(req.Note, req.By)})
		return
	}
	c := engine.ManualRun(rule, rule.Timezone, slot, s.cfg.Rules.Hash(), now)
	c.Token = firedToken(r, rule)
	setTarget(r, c.Key)
	backfilled, err := s.startManual(r.Context(), c, fireBy{actor(r), s.note(req.Note, req.By)})
	switch {
	case errors.Is(err, engine.ErrRunExists):
		msg := fmt.Sprintf("slot %s of rule %s already fired", slot.Format(time.RFC3339), name)
		if run, ok := s.cfg.FSM.Run(c.Key); ok {
			msg += fmt.Sprintf(" (run %s, %s)", run.Key, run.State)
		}
		writeJSON(w, http.StatusConflict, reply.With(msg, map[string]any{"run": c.Key}))
	case err != nil:
		s.writeFireError(w, err, name, req.Slot == "")
	default:
		_, paused := s.cfg.FSM.Paused(name)
		writeJSON(w, http.StatusCreated, FireResponse{Run: c.Key, Rule: name, Slot: slot, Backfilled: backfilled, Paused: paused})
	}
}

// startManual proposes a manual fire's StartRun. A slot that was skipped
// beyond catch-up or paused over sent nothing, and is fired after all
// (RefireRun), once: backfilled is then the state it was in. Otherwise
// err is the StartRun's (engine.ErrRunExists for a slot that fired).
// fireBy is who fired by hand (verified) and what they typed.
type fireBy struct{ actor, note string }

func (s *server) startManual(ctx context.Context, c engine.StartRun, by fireBy) (backfilled string, err error) {
	_, err = s.apply(ctx, engine.CmdStartRun, c)
	if !errors.Is(err, engine.ErrRunExists) {
		return "", err
	}
	run, ok := s.cfg.FSM.Run(c.Key)
	if !ok || (run.State != engine.RunSkipped && run.State != engine.RunPaused) {
		return "", err
	}
	if _, err := s.apply(ctx, engine.CmdRefireRun, engine.RefireRun{Key: c.Key, By: by.actor, Note: by.note, Now: c.Now}); err != nil {
		return "", err
	}
	return run.State.String(), nil
}

// writeFireError answers a fire the log did not take or confirm. A fire
// without a slot starts a run at this node's "now", so repeating it is a
// second run, sent to everyone again: its unconfirmed answer says so
// instead of "safe to repeat".
func (s *server) writeFireError(w http.ResponseWriter, err error, rule string, now bool) {
	unconfirmed := errors.Is(err, engine.ErrNotLeader) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
	if !now || !unconfirmed {
		s.writeApplyError(w, err)
		return
	}
	writeError(w, http.StatusServiceUnavailable, fmt.Sprintf(
		"the fire of rule %s was not confirmed (%v): it may have fired; look at GET /v1/runs?rule=%s before firing again, since a fire without a slot starts a new run each time",
		rule, err, url.QueryEscape(rule)))
}

func (s *server) fireHorizon() time.Duration {
	if s.cfg.FireHorizon > 0 {
		return s.cfg.FireHorizon
	}
	return engine.LedgerRetentionDefault
}

// checkSlot refuses t unless it is a slot of rule's schedule (when the
// server can build schedules).
func (s *server) checkSlot(rule engine.Rule, t time.Time) error {
	if s.cfg.ScheduleFunc == nil {
		return nil
	}
	sched, err := s.cfg.ScheduleFunc(rule)
	if err != nil {
		return &FieldError{"rule", fmt.Sprintf("rule %s: its schedule does not build: %v", rule.Name, err)}
	}
	next, ok := sched.Next(t.Add(-time.Nanosecond))
	if ok && next.Equal(t) {
		return nil
	}
	zone := rule.Timezone
	if zone == "" {
		zone = "UTC"
	}
	reason := fmt.Sprintf("%s is not a slot of rule %s (%s in %s)", t.Format(time.RFC3339Nano), rule.Name, rule.Schedule, zone)
	if ok {
		reason += "; the next slot after it is " + next.Format(time.RFC3339)
	}
	return &FieldError{"slot", reason}
}
