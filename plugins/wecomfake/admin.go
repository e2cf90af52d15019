package wecomfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// AdminHandler is the fake's control API, served apart from the WeCom API:
//
//	GET    /faults               armed faults
//	POST   /faults               arm a Fault (JSON body)
//	DELETE /faults               disarm all
//	POST   /tokens/revoke        {"corp_id":"","agent_id":0} → {"revoked":n}
//	POST   /settings             {"token_lifetime":"30s","token_mode":"rotate","latency":"200ms","unknown_fields":"reject"}
//	POST   /clock/advance        {"by":"2h"} → {"now":…}
//	GET    /calls?path=gettoken  {"count":n,"calls":[…]}
//	GET    /received?userid=ID   messages the member received
//	GET    /robot?key=KEY        messages the robot posted
//	GET    /messages             every delivered message: a page per member, newest first; JSON with ?format=json
//	GET    /drops                every silent drop
//	POST   /reset                forget the records
//	POST   /contacts/move        {"corp_id":"","userid":"u1","departments":[3]}: move a member
//	POST   /contacts/visible     {"corp_id":"","userid":"u1","visible":false}: a member leaves (or returns to) the apps' visible range
//	POST   /callbacks            {"corp_id":"","url":"http://…/v1/wecom/callback/CH","token":"…","aes_key":"…"}: where callbacks go
//	POST   /kf/message           {"open_kfid":"wk1","external_userid":"c1","origin":3,"text":"…"} (origin 5 + servicer_userid: a reply) → kf_msg_or_event
//	POST   /callbacks/card       {"userid":"u1","task_id":"t1","event_key":"done"} → template_card_event
//	POST   /cards/click          a form (userid, task_id, key, corp_id): a card's button on GET /messages → template_card_event
//	POST   /callbacks/contact    {"userid":"u1","external_userid":"c1"} → change_external_contact
//	POST   /callbacks/release    send the held callbacks, newest first (out of order)
//	                             each callback above takes "twice", "hold", "bad_signature" (faults)
//
// Errors are HTTP 4xx with {"error":"…"}.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /faults", func(w http.ResponseWriter, r *http.Request) {
		writeAdmin(w, http.StatusOK, s.Faults())
	})
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		var f Fault
		if !readAdmin(w, r, &f) {
			return
		}
		if err := s.AddFault(f); err != nil {
			writeAdminError(w, http.StatusBadRequest, err)
			return
		}
		writeAdmin(w, http.StatusOK, s.Faults())
	})
	mux.HandleFunc("DELETE /faults", func(w http.ResponseWriter, r *http.Request) {
		s.ClearFaults()
		writeAdmin(w, http.StatusOK, []Fault{})
	})
	mux.HandleFunc("POST /tokens/revoke", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			CorpID  string `json:"corp_id"`
			AgentID int    `json:"agent_id"`
		}
		if !readAdmin(w, r, &req) {
			return
		}
		writeAdmin(w, http.StatusOK, map[string]int{"revoked": s.RevokeTokens(req.CorpID, req.AgentID)})
	})
	mux.HandleFunc("POST /settings", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			TokenLifetime string            `json:"token_lifetime"`
			TokenMode     TokenMode         `json:"token_mode"`
			Latency       string            `json:"latency"`
			UnknownFields UnknownFieldsMode `json:"unknown_fields"`
		}
		if !readAdmin(w, r, &req) {
			return
		}
		lifetime, err := parseOptDuration(req.TokenLifetime)
		if err != nil {
			writeAdminError(w, http.StatusBadRequest, fmt.Errorf("token_lifetime: %w", err))
			return
		}
		latency, err := parseOptDuration(req.Latency)
		if err != nil {
			writeAdminError(w, http.StatusBadRequest, fmt.Errorf("latency: %w", err))
			return
		}
		if req.TokenMode != "" && req.TokenMode != TokenSticky && req.TokenMode != TokenRotate {
			writeAdminError(w, http.StatusBadRequest, fmt.Errorf("%w: token mode %q", ErrBadConfig, req.TokenMode))
			return
		}
		if req.UnknownFields != "" {
			if err := s.SetUnknownFields(req.UnknownFields); err != nil {
				writeAdminError(w, http.StatusBadRequest, err)
				return
			}
		}
		if req.TokenMode != "" {
			_ = s.SetTokenMode(req.TokenMode) // checked above
		}
		if lifetime > 0 {
			s.SetTokenLifetime(lifetime)
		}
		if req.Latency != "" {
			s.SetLatency(latency)
		}
		cfg := s.settings()
		writeAdmin(w, http.StatusOK, map[string]string{
			"token_lifetime": cfg.TokenLifetime.String(), "token_mode": string(cfg.TokenMode), "latency": s.currentLatency().String(),
			"unknown_fields": string(cfg.UnknownFields),
		})
	})
	mux.HandleFunc("POST /clock/advance", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			By string `json:"by"`
		}
		if !readAdmin(w, r, &req) {
			return
		}
		d, err := time.ParseDuration(req.By)
		if err != nil || d < 0 {
			writeAdminError(w, http.StatusBadRequest, fmt.Errorf("by: want a non-negative duration like \"2h\", got %q", req.By))
			return
		}
		s.Advance(d)
		writeAdmin(w, http.StatusOK, map[string]time.Time{"now": s.Now()})
	})
	mux.HandleFunc("GET /calls", func(w http.ResponseWriter, r *http.Request) {
		path := normPath(r.URL.Query().Get("path"))
		calls := []Call{}
		for _, c := range s.Requests() {
			if path == "" || c.Path == path {
				calls = append(calls, c)
			}
		}
		count := len(calls)
		if path != "" {
			count = s.Calls(path)
		}
		writeAdmin(w, http.StatusOK, map[string]any{"count": count, "calls": calls})
	})
	mux.HandleFunc("GET /received", func(w http.ResponseWriter, r *http.Request) {
		u := r.URL.Query().Get("userid")
		if u == "" {
			writeAdminError(w, http.StatusBadRequest, fmt.Errorf("userid is required"))
			return
		}
		writeAdmin(w, http.StatusOK, nonNil(s.Received(u)))
	})
	mux.HandleFunc("GET /robot", func(w http.ResponseWriter, r *http.Request) {
		writeAdmin(w, http.StatusOK, nonNil(s.RobotReceived(r.URL.Query().Get("key"))))
	})
	mux.HandleFunc("GET /messages", s.serveMessages)
	mux.HandleFunc("GET /drops", func(w http.ResponseWriter, r *http.Request) {
		writeAdmin(w, http.StatusOK, nonNil(s.Drops()))
	})
	mux.HandleFunc("POST /contacts/move", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			CorpID      string `json:"corp_id"`
			UserID      string `json:"userid"`
			Departments []int  `json:"departments"`
		}
		if !readAdmin(w, r, &req) {
			return
		}
		if err := s.MoveMember(req.CorpID, req.UserID, req.Departments); err != nil {
			writeAdminError(w, http.StatusBadRequest, err)
			return
		}
		writeAdmin(w, http.StatusOK, map[string]bool{"ok": true})
	})
	mux.HandleFunc("POST /contacts/visible", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			CorpID  string `json:"corp_id"`
			UserID  string `json:"userid"`
			Visible *bool  `json:"visible"`
		}
		if !readAdmin(w, r, &req) {
			return
		}
		if req.Visible == nil {
			writeAdminError(w, http.StatusBadRequest, errors.New("visible (true or false) is required"))
			return
		}
		if err := s.SetMemberVisible(req.CorpID, req.UserID, *req.Visible); err != nil {
			writeAdminError(w, http.StatusBadRequest, err)
			return
		}
		writeAdmin(w, http.StatusOK, map[string]bool{"ok": true})
	})
	s.callbackAdmin(mux)
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, r *http.Request) {
		s.ResetRecords()
		writeAdmin(w, http.StatusOK, map[string]bool{"ok": true})
	})
	return mux
}

func (s *Server) settings() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

func (s *Server) currentLatency() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latency
}

func parseOptDuration(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want a non-negative duration like \"30s\", got %q", v)
	}
	return d, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func readAdmin(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		writeAdminError(w, http.StatusBadRequest, fmt.Errorf("bad JSON body: %w", err))
		return false
	}
	return true
}

func writeAdmin(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeAdminError(w http.ResponseWriter, status int, err error) {
	writeAdmin(w, status, map[string]string{"error": err.Error()})
}
