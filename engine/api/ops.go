package api

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api/reply"
)

// Operators' writes: pause and resume a rule, retry finished deliveries by
// hand. Each goes through the log like every write (forwarded to the
// leader); who did it is recorded with it.

// maxOpsBody bounds the bodies of the operators' writes (a retry may list
// ids).
const maxOpsBody = 1 << 20

// retryChunk is how many deliveries one RetryDeliveries command carries.
const retryChunk = 500

// DefaultRetryDeadline is a retried delivery's new deadline, counted from
// the retry, when the request names none.
const DefaultRetryDeadline = 2 * time.Hour

// PauseRequest is the (optional) body of POST /v1/rules/{name}/pause.
type PauseRequest struct {
	Reason string `json:"reason,omitempty"`
	// Note is free text for the record (the CLI sends user@host). Who
	// paused (paused_by) is the verified caller, never the body's.
	Note string `json:"note,omitempty"`
	// By is what older clients send in Note's place: taken as the note.
	By string `json:"by,omitempty"`
}

// ResumeRequest is the (optional) body of POST /v1/rules/{name}/resume.
// A resume keeps nothing of its caller but the audit record.
type ResumeRequest struct {
	Note string `json:"note,omitempty"`
	By   string `json:"by,omitempty"`
}

// PauseView answers pause and resume: the rule and whether it is paused.
type PauseView struct {
	Rule     string    `json:"rule"`
	Paused   bool      `json:"paused"`
	PausedBy string    `json:"paused_by,omitempty"`
	PausedAt time.Time `json:"paused_at,omitzero"`
	Reason   string    `json:"reason,omitempty"`
	// Note is what the pausing client typed (paused_by is who it was).
	Note string `json:"note,omitempty"`
}

// RetryRequest is the body of POST /v1/deliveries/retry (a filter or ids)
// and, with only Deadline and By, of POST /v1/deliveries/{id}/retry.
type RetryRequest struct {
	IDs   []string `json:"ids,omitempty"`
	Run   string   `json:"run,omitempty"`
	Rule  string   `json:"rule,omitempty"`
	State string   `json:"state,omitempty"` // failed or expired; with rule: required
	// Since: only deliveries that ended at or after it (RFC 3339, or
	// "YYYY-MM-DD HH:MM" in the node's display zone).
	Since string `json:"since,omitempty"`
	// Deadline is a duration ("2h") from now; default 2h.
	Deadline string `json:"deadline,omitempty"`
	// Note is free text kept with the delivery (retry_note); who retried
	// (retried_by) is the verified caller. By: older clients' Note.
	Note string `json:"note,omitempty"`
	By   string `json:"by,omitempty"`
}

// RetryResponse lists what was retried and what was left alone, and why.
type RetryResponse struct {
	Retried  []string           `json:"retried"`
	Skipped  []engine.RetrySkip `json:"skipped"`
	Deadline time.Time          `json:"deadline"`
}

// actor names who made a request as auth established it: the token's
// name, "loopback" (no tokens, the node's own machine), or the actor a
// member vouched for on a forward. Never what the body says (issue 19:
// paused_by, retried_by and confirmed_by were the caller's own claim, and
// the console showed them as fact); that goes into the note. Without an
// identity (a server built without auth: tests) the client's address.
func actor(r *http.Request) string {
	if id, ok := IdentityFrom(r.Context()); ok && id.Actor != "" && id.Actor != ActorAnonymous {
		return id.Actor
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "api@" + host
}

// maxNote bounds a note (it is kept in the replicated state).
const maxNote = 256

// note is the free text a write keeps beside its verified actor: the
// body's note, or its by (older clients). It is left out while a member
// applies FSM version 3, which cannot read it (the command is then the
// version-1 body it always was).
func (s *server) note(note, by string) string {
	n := clip(strings.TrimSpace(cmp.Or(strings.TrimSpace(note), by)), maxNote)
	if n == "" || s.cfg.FSM == nil || s.cfg.FSM.OldestMemberFSM() < engine.FSMVersion4 {
		return ""
	}
	return n
}

func pauseView(rule string, p *engine.Pause) PauseView {
	if p == nil {
		return PauseView{Rule: rule}
	}
	return PauseView{Rule: rule, Paused: true, PausedBy: p.By, PausedAt: p.At, Reason: p.Reason, Note: p.Note}
}

func (s *server) pauseRule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !s.ruleKnown(w, name) {
		return
	}
	var req PauseRequest
	if err := decodeBody(w, r, maxFireBody, &req, true, `{"reason": "…"} (or no body)`); err != nil {
		writeFieldError(w, err)
		return
	}
	res, err := s.apply(r.Context(), engine.CmdPauseRule, engine.PauseRule{Rule: name, By: actor(r), Reason: req.Reason, Note: s.note(req.Note, req.By), Now: s.now()})
	switch {
	case errors.Is(err, engine.ErrAlreadyPaused):
		p, _ := s.cfg.FSM.Paused(name)
		writeJSON(w, http.StatusConflict, reply.With("rule "+name+" is already paused", map[string]any{"pause": pauseView(name, p)}))
	case err != nil:
		s.writeApplyError(w, err)
	default:
		writeJSON(w, http.StatusOK, pauseView(name, res.(*engine.Pause)))
	}
}

func (s *server) resumeRule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req ResumeRequest
	if err := decodeBody(w, r, maxFireBody, &req, true, `{} (or no body)`); err != nil {
		writeFieldError(w, err)
		return
	}
	// A rule removed from the directory while paused can still be resumed.
	if _, paused := s.cfg.FSM.Paused(name); !paused && !s.ruleKnown(w, name) {
		return
	}
	_, err := s.apply(r.Context(), engine.CmdResumeRule, engine.ResumeRule{Rule: name, By: actor(r), Now: s.now()})
	switch {
	case errors.Is(err, engine.ErrNotPaused):
		writeJSON(w, http.StatusConflict, reply.With("rule "+name+" is not paused", map[string]any{"pause": pauseView(name, nil)}))
	case err != nil:
		s.writeApplyError(w, err)
	default:
		writeJSON(w, http.StatusOK, pauseView(name, nil))
	}
}

// ruleKnown answers 404 (or 503 without rules) unless name is loaded.
func (s *server) ruleKnown(w http.ResponseWriter, name string) bool {
	if s.cfg.Rules == nil {
		writeError(w, http.StatusServiceUnavailable, "this node has no rules")
		return false
	}
	if _, ok := findRule(s.cfg.Rules, name); !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no rule named %q is loaded", name))
		return false
	}
	return true
}

// retryOne is POST /v1/deliveries/{id}/retry: 200 when it was retried,
// 409 with the reason when it cannot be (sent, still pending).
func (s *server) retryOne(w http.ResponseWriter, r *http.Request) {
	d, ok := s.findDelivery(w, r.PathValue("id"))
	if !ok {
		return
	}
	var req RetryRequest
	if err := decodeBody(w, r, maxFireBody, &req, true, `{"deadline": "2h"} (or no body)`); err != nil {
		writeFieldError(w, err)
		return
	}
	if len(req.IDs) > 0 || req.Run != "" || req.Rule != "" || req.State != "" || req.Since != "" {
		writeFieldError(w, &FieldError{"body", "this endpoint retries the delivery in its path; filters go to POST /v1/deliveries/retry"})
		return
	}
	res, err := s.retry(r, []string{d.ID}, req)
	if err != nil {
		s.writeRetryError(w, err)
		return
	}
	if len(res.Skipped) > 0 {
		writeJSON(w, http.StatusConflict, reply.With(fmt.Sprintf("delivery %s not retried: %s", d.ID, res.Skipped[0].Reason), map[string]any{"id": d.ID, "state": d.State.String()}))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// retryMany is POST /v1/deliveries/retry: by ids, a run, or a rule and
// state (failed or expired) since a time.
func (s *server) retryMany(w http.ResponseWriter, r *http.Request) {
	var req RetryRequest
	if err := decodeBody(w, r, maxOpsBody, &req, false, `{"ids": […]} or {"run": "KEY"} or {"rule": "R", "state": "failed", "since": "…"}, with "deadline": "2h"`); err != nil {
		writeFieldError(w, err)
		return
	}
	ids, err := s.retryTargets(req)
	if err != nil {
		writeFieldError(w, err)
		return
	}
	setTarget(r, retryTarget(req, ids))
	res, err := s.retry(r, ids, req)
	if err != nil {
		s.writeRetryError(w, err)
		return
	}
	if len(res.Retried) == 0 {
		setUnchanged(r) // nothing matched, or every match was left alone
	}
	writeJSON(w, http.StatusOK, res)
}

// OneSelector says whether a request names its deliveries one way only
// (the API checks it, and the CLI before it sends):
// by ids, by run or by rule (retry and recall take the same three).
func OneSelector(ids []string, run, rule string) bool {
	n := 0
	for _, set := range []bool{len(ids) > 0, run != "", rule != ""} {
		if set {
			n++
		}
	}
	return n == 1
}

// retryTargets resolves a retry request to delivery ids.
func (s *server) retryTargets(req RetryRequest) ([]string, error) {
	if !OneSelector(req.IDs, req.Run, req.Rule) {
		return nil, &FieldError{"body", "give exactly one of ids, run, or rule (with state)"}
	}
	if len(req.IDs) > 0 {
		if req.State != "" || req.Since != "" {
			return nil, &FieldError{"ids", "state and since filter run or rule, not a list of ids"}
		}
		out := make([]string, 0, len(req.IDs))
		for _, id := range req.IDs {
			d, err := s.cfg.FSM.FindDelivery(id)
			if err != nil {
				return nil, &FieldError{"ids", err.Error()}
			}
			out = append(out, d.ID)
		}
		return out, nil
	}
	var state engine.DeliveryState
	switch req.State {
	case "failed":
		state = engine.StateFailed
	case "expired":
		state = engine.StateExpired
	case "":
		if req.Rule != "" {
			return nil, &FieldError{"state", "required with rule: failed or expired"}
		}
	default:
		return nil, &FieldError{"state", "want failed or expired"}
	}
	var since time.Time
	if req.Since != "" {
		t, err := engine.ParseTime(req.Since, s.zone())
		if err != nil {
			return nil, &FieldError{"since", err.Error()}
		}
		since = t
	}
	ds := s.cfg.FSM.Deliveries(func(d *engine.Delivery) bool {
		if req.Run != "" && d.RunKey != req.Run || req.Rule != "" && d.Rule != req.Rule {
			return false
		}
		if state != 0 && d.State != state || state == 0 && d.State != engine.StateFailed && d.State != engine.StateExpired {
			return false
		}
		return since.IsZero() || !d.EndedAt.Before(since)
	})
	if len(ds) == 0 {
		// A filter that names nothing is a typo, not "nothing failed".
		if _, ok := s.cfg.FSM.Run(req.Run); req.Run != "" && !ok {
			return nil, &FieldError{"run", fmt.Sprintf("no run %q: a run key is RULE@SLOT as GET /v1/runs lists it, e.g. daily_report@2026-11-30T01:00:00Z", req.Run)}
		}
		if req.Rule != "" && s.cfg.Rules != nil {
			if _, ok := findRule(s.cfg.Rules, req.Rule); !ok {
				return nil, &FieldError{"rule", fmt.Sprintf("no rule named %q is loaded, and none of its deliveries is %s", req.Rule, req.State)}
			}
		}
	}
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out, nil
}

// retry proposes RetryDeliveries for ids, in chunks.
func (s *server) retry(r *http.Request, ids []string, req RetryRequest) (RetryResponse, error) {
	wait := DefaultRetryDeadline
	if req.Deadline != "" {
		d, err := time.ParseDuration(req.Deadline)
		if err != nil || d <= 0 {
			return RetryResponse{}, &FieldError{"deadline", fmt.Sprintf("%q: want a positive duration such as 2h", req.Deadline)}
		}
		wait = d
	}
	now := s.now()
	out := RetryResponse{Retried: []string{}, Skipped: []engine.RetrySkip{}, Deadline: now.Add(wait)}
	by, note := actor(r), s.note(req.Note, req.By)
	for start := 0; start < len(ids); start += retryChunk {
		chunk := ids[start:min(start+retryChunk, len(ids))]
		res, err := s.apply(r.Context(), engine.CmdRetryDeliveries, engine.RetryDeliveries{IDs: chunk, By: by, Note: note, Deadline: out.Deadline, Now: now})
		if err != nil {
			if len(out.Retried) > 0 {
				return out, fmt.Errorf("%w (after %d were retried: %s…)", err, len(out.Retried), out.Retried[0])
			}
			return out, err
		}
		rr := res.(engine.RetryResult)
		out.Retried = append(out.Retried, rr.Retried...)
		out.Skipped = append(out.Skipped, rr.Skipped...)
	}
	return out, nil
}

func (s *server) writeRetryError(w http.ResponseWriter, err error) {
	var fe *FieldError
	if errors.As(err, &fe) {
		writeFieldError(w, err)
		return
	}
	s.writeApplyError(w, err)
}

// retryTarget names what a retry acted on in its audit record: its ids
// when they are few, else its filter and how many it matched.
func retryTarget(req RetryRequest, ids []string) string {
	if len(req.IDs) > 0 && len(req.IDs) <= 3 {
		return strings.Join(req.IDs, ",")
	}
	var parts []string
	for _, kv := range [][2]string{{"run", req.Run}, {"rule", req.Rule}, {"state", req.State}, {"since", req.Since}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	return strings.TrimSpace(strings.Join(parts, " ") + fmt.Sprintf(" (%d deliveries)", len(ids)))
}
