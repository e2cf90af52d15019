package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/heraldhq/herald/engine"
)

// Recall (engine/recall.go): POST /v1/deliveries/recall asks for sent
// messages to be taken back, by ids, a run, or a rule and a time; the
// leader asks each one's channel and the answer waits (up to wait) for the
// verdicts, one per delivery.

// recallChunk is how many deliveries one RecallDeliveries carries.
const recallChunk = 500

// Bounds of RecallRequest.Wait.
const (
	recallWaitDefault = 15 * time.Second
	recallWaitMax     = time.Minute
)

// RecallRequest is the body of POST /v1/deliveries/recall: exactly one of
// ids, run, or rule with since.
type RecallRequest struct {
	IDs  []string `json:"ids,omitempty"`
	Run  string   `json:"run,omitempty"`
	Rule string   `json:"rule,omitempty"`
	// Since: with rule, the deliveries sent at or after it (RFC 3339, or
	// "YYYY-MM-DD HH:MM" in the node's display zone).
	Since string `json:"since,omitempty"`
	// Wait is how long the answer waits for the channels' verdicts
	// ("15s", the default; at most 1m); "0s" answers at once.
	Wait string `json:"wait,omitempty"`
	// By is accepted from older clients and not used: the recall records
	// the verified caller (actor), never what the body says.
	By string `json:"by,omitempty"`
}

// RecallItem is one delivery's outcome.
type RecallItem struct {
	ID        string `json:"id"`
	Recipient string `json:"recipient,omitempty"`
	Channel   string `json:"channel,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// RecallResponse sorts the deliveries asked for by outcome: recalled, not
// recallable (each with its reason; nothing about it changed), or still
// pending at the channel when the wait ended.
type RecallResponse struct {
	Recalled      []RecallItem `json:"recalled"`
	NotRecallable []RecallItem `json:"not_recallable"`
	Pending       []RecallItem `json:"pending"`
}

func (s *server) recallDeliveries(w http.ResponseWriter, r *http.Request) {
	var req RecallRequest
	if err := decodeBody(w, r, maxOpsBody, &req, false, `{"ids": […]} or {"run": "KEY"} or {"rule": "R", "since": "…"}`); err != nil {
		writeFieldError(w, err)
		return
	}
	wait := recallWaitDefault
	if req.Wait != "" {
		d, err := time.ParseDuration(req.Wait)
		if err != nil || d < 0 || d > recallWaitMax {
			writeFieldError(w, &FieldError{"wait", fmt.Sprintf("%q: want a duration from 0s to %s", req.Wait, recallWaitMax)})
			return
		}
		wait = d
	}
	ids, err := s.recallTargets(req)
	if err != nil {
		writeFieldError(w, err)
		return
	}
	setTarget(r, recallTarget(req, ids))
	by := actor(r)
	out := RecallResponse{Recalled: []RecallItem{}, NotRecallable: []RecallItem{}, Pending: []RecallItem{}}
	var asked []string
	now := s.now()
	for start := 0; start < len(ids); start += recallChunk {
		chunk := ids[start:min(start+recallChunk, len(ids))]
		res, err := s.apply(r.Context(), engine.CmdRecallDeliveries, engine.RecallDeliveries{IDs: chunk, By: by, Now: now})
		if err != nil {
			s.writeApplyError(w, err)
			return
		}
		ra := res.(engine.RecallAsked)
		asked = append(asked, ra.Requested...)
		for _, sk := range ra.Skipped {
			out.NotRecallable = append(out.NotRecallable, s.recallItem(sk.ID, sk.Reason))
		}
	}
	s.awaitRecalls(r.Context(), asked, wait)
	for _, id := range asked {
		d, ok := s.cfg.FSM.Delivery(id)
		switch {
		case !ok:
			out.NotRecallable = append(out.NotRecallable, RecallItem{ID: id, Reason: "pruned meanwhile"})
		case d.State == engine.StateRecalled:
			out.Recalled = append(out.Recalled, s.recallItem(id, ""))
		case d.Recall != nil && d.Recall.Done:
			out.NotRecallable = append(out.NotRecallable, s.recallItem(id, recallReason(d.Recall)))
		default:
			out.Pending = append(out.Pending, s.recallItem(id, ""))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func recallReason(rc *engine.Recall) string {
	if rc.Code != "" {
		return "errcode " + rc.Code + ": " + rc.Error
	}
	return rc.Error
}

func (s *server) recallItem(id, reason string) RecallItem {
	it := RecallItem{ID: id, Reason: reason}
	if d, ok := s.cfg.FSM.Delivery(id); ok {
		it.Recipient, it.Channel = d.Recipient, d.Channel
	}
	return it
}

// awaitRecalls waits until every one of ids has its channel's verdict, or
// wait passed.
func (s *server) awaitRecalls(ctx context.Context, ids []string, wait time.Duration) {
	if len(ids) == 0 || wait <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	ch, stop := s.cfg.FSM.Subscribe()
	defer stop()
	for {
		done := true
		for _, id := range ids {
			if d, ok := s.cfg.FSM.Delivery(id); ok && d.State == engine.StateSent && d.Recall != nil && !d.Recall.Done {
				done = false
				break
			}
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// recallTargets resolves a recall request to delivery ids.
func (s *server) recallTargets(req RecallRequest) ([]string, error) {
	if !OneSelector(req.IDs, req.Run, req.Rule) {
		return nil, &FieldError{"body", "give exactly one of ids, run, or rule (with since)"}
	}
	if len(req.IDs) > 0 {
		if req.Since != "" {
			return nil, &FieldError{"since", "since goes with rule, not with ids"}
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
	if req.Run != "" {
		if req.Since != "" {
			return nil, &FieldError{"since", "since goes with rule, not with run"}
		}
		if _, ok := s.cfg.FSM.Run(req.Run); !ok {
			return nil, &FieldError{"run", fmt.Sprintf("no run %q: a run key is RULE@SLOT as GET /v1/runs lists it", req.Run)}
		}
		var out []string
		for _, d := range s.cfg.FSM.RunDeliveries(req.Run) {
			if d.Digest == "" {
				out = append(out, d.ID)
			}
		}
		return out, nil
	}
	if req.Since == "" {
		return nil, &FieldError{"since", "required with rule: recall what the rule sent since when?"}
	}
	since, err := engine.ParseTime(req.Since, s.zone())
	if err != nil {
		return nil, &FieldError{"since", err.Error()}
	}
	ds := s.cfg.FSM.Deliveries(func(d *engine.Delivery) bool {
		return d.Rule == req.Rule && (d.State == engine.StateSent || d.State == engine.StateRecalled) && !d.SentAt.Before(since)
	})
	if len(ds) == 0 && s.cfg.Rules != nil {
		if _, ok := findRule(s.cfg.Rules, req.Rule); !ok {
			return nil, &FieldError{"rule", fmt.Sprintf("no rule named %q is loaded, and none of its deliveries was sent since then", req.Rule)}
		}
	}
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out, nil
}

// recallTarget names what a recall acted on in its audit record.
func recallTarget(req RecallRequest, ids []string) string {
	if len(req.IDs) > 0 && len(req.IDs) <= 3 {
		return strings.Join(req.IDs, ",")
	}
	var parts []string
	for _, kv := range [][2]string{{"run", req.Run}, {"rule", req.Rule}, {"since", req.Since}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	return strings.TrimSpace(strings.Join(parts, " ") + fmt.Sprintf(" (%d deliveries)", len(ids)))
}
