package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api/reply"
)

// Approval before a mass send (engine/approval.go): a held run is approved
// or rejected by POST /v1/runs/{key}/approve and /reject (operate). A run
// fired by hand must be approved by another token than the one that fired
// it, so the fire records its token (for rules with an approval option
// only: the record needs FSM version 4, and other fires need not wait for
// it in a rolling upgrade).

// firedToken is the token a manual fire of rule records: the caller's
// token name, "" without a token (loopback) or an approval option.
func firedToken(r *http.Request, rule engine.Rule) string {
	if rule.ApprovalOver == 0 {
		return ""
	}
	id, ok := IdentityFrom(r.Context())
	if !ok {
		return ""
	}
	switch id.Actor {
	case "", ActorLoopback, ActorAnonymous, ActorPeer:
		return ""
	}
	return id.Actor
}

// decider names who decides: the token, else the loopback actor.
func decider(r *http.Request) string {
	if id, ok := IdentityFrom(r.Context()); ok && id.Actor != "" {
		return id.Actor
	}
	return ActorLoopback
}

func (s *server) approveRun(w http.ResponseWriter, r *http.Request) { s.decideRun(w, r, true) }
func (s *server) rejectRun(w http.ResponseWriter, r *http.Request)  { s.decideRun(w, r, false) }

func (s *server) decideRun(w http.ResponseWriter, r *http.Request, approve bool) {
	key := r.PathValue("key")
	var req struct{}
	if err := decodeBody(w, r, maxFireBody, &req, true, `{} (or no body)`); err != nil {
		writeFieldError(w, err)
		return
	}
	run, ok := s.cfg.FSM.Run(key)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no run %q: a run key is RULE@SLOT or task:KEY as GET /v1/runs lists it", key))
		return
	}
	res, err := s.apply(r.Context(), engine.CmdDecideRun, engine.DecideRun{RunKey: key, Approve: approve, By: decider(r), Now: s.now()})
	switch {
	case errors.Is(err, engine.ErrNotAwaitingApproval):
		writeJSON(w, http.StatusConflict, reply.With(fmt.Sprintf("run %s is %s, not awaiting approval", key, run.State), map[string]any{"run": key, "state": run.State.String()}))
	case errors.Is(err, engine.ErrSameToken):
		writeJSON(w, http.StatusForbidden, reply.With(fmt.Sprintf("run %s was fired by hand by token %s, which cannot approve it: another token must", key, run.FiredToken), map[string]any{"run": key, "fired_token": run.FiredToken}))
	case err != nil:
		s.writeApplyError(w, err)
	default:
		d := res.(engine.DecideResult)
		writeJSON(w, http.StatusOK, map[string]any{
			"run": key, "state": d.Run.State.String(), "approval": d.Run.Approval,
			"released": d.Released, "cancelled": d.Cancelled, "expired": d.Expired,
		})
	}
}
