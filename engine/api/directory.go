package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/heraldhq/herald/engine"
)

// DirectoryConfig wires the directory endpoints to the node.
type DirectoryConfig struct {
	// Configured is true when this node's config has a directory section.
	Configured bool
	// ConfiguredFunc, when set, answers instead of Configured: the section
	// may come or go with a config reload (SIGHUP).
	ConfiguredFunc func() bool
	// Hash returns the directory snapshot the node's rules have in force.
	Hash func() string
	// Refresh asks the leader's refresher for a refresh now.
	Refresh func()
}

func (d *DirectoryConfig) configured() bool {
	if d.ConfiguredFunc != nil {
		return d.ConfiguredFunc()
	}
	return d.Configured
}

// DirectoryView is the body of GET /v1/directory.
type DirectoryView struct {
	NodeID string `json:"node_id"`
	// Configured: this node's config has a directory section (only the
	// leader's matters: it fetches).
	Configured bool `json:"configured"`
	// InForce is the snapshot every plan and preview uses; null before the
	// first refresh.
	InForce *DirectorySummary `json:"in_force"`
	// Held is a refresh held for an operator's confirmation; null when
	// none.
	Held *DirectorySummary `json:"held"`
	// NodeHash is the snapshot this node's rules have in force; it equals
	// in_force.hash once the node applied it (InSync).
	NodeHash string `json:"node_hash"`
	InSync   bool   `json:"in_sync"`
}

// DirectorySummary describes one snapshot.
type DirectorySummary struct {
	Hash        string    `json:"hash"`
	Source      string    `json:"source"`
	People      int       `json:"people"`
	FetchedAt   time.Time `json:"fetched_at"`
	AppliedAt   time.Time `json:"applied_at"`
	ConfirmedBy string    `json:"confirmed_by,omitempty"`
	ConfirmedAt time.Time `json:"confirmed_at,omitzero"`
	// Note is what the confirming client typed (confirmed_by is who it
	// was, as verified).
	Note string `json:"note,omitempty"`
	// Removed (a held refresh only) counts the people it would remove;
	// RemovedSample names the first of them.
	Removed       int      `json:"removed,omitempty"`
	RemovedSample []string `json:"removed_sample,omitempty"`
}

// ConfirmDirectoryRequest is the body of POST /v1/directory/confirm.
type ConfirmDirectoryRequest struct {
	// Hash is the held refresh's hash, as the alert and GET /v1/directory
	// show it: the operator confirms what they saw. Empty confirms
	// whatever is held.
	Hash string `json:"hash,omitempty"`
	// Note is free text for the record; who confirmed (confirmed_by) is
	// the verified caller. By: older clients' Note.
	Note string `json:"note,omitempty"`
	By   string `json:"by,omitempty"`
}

// removedSampleMax bounds RemovedSample.
const removedSampleMax = 20

func summary(r *engine.DirectoryRecord) *DirectorySummary {
	if r == nil {
		return nil
	}
	s := &DirectorySummary{Hash: r.Hash, Source: r.Source, People: len(r.UserIDs), FetchedAt: r.FetchedAt,
		AppliedAt: r.AppliedAt, ConfirmedBy: r.ConfirmedBy, ConfirmedAt: r.ConfirmedAt, Note: r.ConfirmNote, Removed: len(r.Removed)}
	if len(r.Removed) > 0 {
		s.RemovedSample = r.Removed[:min(len(r.Removed), removedSampleMax)]
	}
	return s
}

func (s *server) directoryView() DirectoryView {
	cur, held := s.cfg.FSM.Directory()
	v := DirectoryView{NodeID: s.cfg.NodeID, InForce: summary(cur), Held: summary(held)}
	if d := s.cfg.Directory; d != nil {
		v.Configured = d.configured()
		if d.Hash != nil {
			v.NodeHash = d.Hash()
		}
	}
	v.InSync = (cur == nil && v.NodeHash == "") || (cur != nil && cur.Hash == v.NodeHash)
	return v
}

func (s *server) getDirectory(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.directoryView())
}

// getDirectorySnapshot answers the snapshot's people as replicated (the
// held one with ?held=1): what `herald rules preview --directory` merges.
func (s *server) getDirectorySnapshot(w http.ResponseWriter, r *http.Request) {
	cur, held := s.cfg.FSM.Directory()
	rec, what := cur, "no directory snapshot is in force (no directory configured, or no refresh succeeded yet)"
	if r.URL.Query().Get("held") == "1" {
		rec, what = held, "no directory refresh is held"
	}
	if rec == nil {
		writeError(w, http.StatusNotFound, what)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Herald-Directory-Hash", rec.Hash)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(rec.Body)
}

func (s *server) confirmDirectory(w http.ResponseWriter, r *http.Request) {
	var req ConfirmDirectoryRequest
	if err := decodeBody(w, r, maxFireBody, &req, true, `{"hash": "the held refresh's hash", "by": "who confirms"}`); err != nil {
		writeFieldError(w, err)
		return
	}
	setTarget(r, req.Hash)
	_, err := s.apply(r.Context(), engine.CmdConfirmDirectory, engine.ConfirmDirectory{Hash: req.Hash, By: actor(r), Note: s.note(req.Note, req.By), Now: s.now()})
	switch {
	case errors.Is(err, engine.ErrNoHeldDirectory):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, engine.ErrHeldDirectoryMismatch):
		writeError(w, http.StatusConflict, fmt.Sprintf("%v: look again (GET /v1/directory) and confirm what is held now", err))
	case err != nil:
		s.writeApplyError(w, err)
	default:
		writeJSON(w, http.StatusOK, s.directoryView())
	}
}

// refreshDirectory asks the leader (writes are forwarded there) to refresh
// the directory now; the answer does not wait for the refresh.
func (s *server) refreshDirectory(w http.ResponseWriter, r *http.Request) {
	d := s.cfg.Directory
	if d == nil || !d.configured() || d.Refresh == nil {
		writeError(w, http.StatusConflict, "the leader has no directory section in its config")
		return
	}
	d.Refresh()
	// It only wakes the leader's fetch (what the fetch finds is recorded
	// on its own): repeated, it folds like a write that changed nothing.
	setUnchanged(r)
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "refresh requested; see GET /v1/directory"})
}
