package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The directory: people read from an external source (WeCom's contacts)
// by the leader and replicated through the log, so that every node plans
// and previews with the same people. The body is opaque to the engine (the
// rules package reads it); the engine keeps the userids to guard against
// a refresh that would remove too many people at once. See DESIGN.md,
// "The directory".

// ErrNoHeldDirectory is ConfirmDirectory's answer when no refresh is held.
var ErrNoHeldDirectory = errors.New("no directory refresh is held for confirmation")

// ErrHeldDirectoryMismatch is ConfirmDirectory's answer when the hash it
// names is not the held refresh's (a newer refresh replaced it).
var ErrHeldDirectoryMismatch = errors.New("the held directory refresh has another hash")

// DirectoryRecord is a directory snapshot as the state holds it: the one
// in force, or the one held for an operator's confirmation.
type DirectoryRecord struct {
	Hash      string          `json:"hash"`
	Source    string          `json:"source"`
	Body      json.RawMessage `json:"body"`
	UserIDs   []string        `json:"userids"` // sorted
	FetchedAt time.Time       `json:"fetched_at"`
	// AppliedAt is when it came into force (or was held).
	AppliedAt time.Time `json:"applied_at"`
	// Removed are the userids in force that a held snapshot would remove.
	Removed []string `json:"removed,omitempty"`
	// ConfirmedBy and ConfirmedAt are set on a snapshot an operator
	// confirmed after it was held.
	ConfirmedBy string    `json:"confirmed_by,omitempty"`
	ConfirmedAt time.Time `json:"confirmed_at,omitzero"`
	// ConfirmNote is what the confirming client typed (FSM version 4);
	// ConfirmedBy is the verified actor.
	ConfirmNote string `json:"confirm_note,omitempty"`
}

// SetDirectory puts a directory snapshot in force. A held refresh is
// dropped: this newer one supersedes it.
type SetDirectory struct {
	Hash      string          `json:"hash"`
	Source    string          `json:"source"`
	Body      json.RawMessage `json:"body"`
	UserIDs   []string        `json:"userids"`
	FetchedAt time.Time       `json:"fetched_at"`
	Now       time.Time       `json:"now"`
}

// HoldDirectory holds a refresh that would remove more people than the
// configured share, until an operator confirms it (ConfirmDirectory); the
// snapshot in force stays. It raises the "directory:held" alert.
type HoldDirectory struct {
	Hash      string          `json:"hash"`
	Source    string          `json:"source"`
	Body      json.RawMessage `json:"body"`
	UserIDs   []string        `json:"userids"`
	Removed   []string        `json:"removed"`
	FetchedAt time.Time       `json:"fetched_at"`
	Now       time.Time       `json:"now"`
}

// ConfirmDirectory puts the held refresh in force. Hash, when set, must
// be the held one's: an operator confirms what they saw.
type ConfirmDirectory struct {
	Hash string    `json:"hash,omitempty"`
	By   string    `json:"by"`
	Now  time.Time `json:"now"`
	// Note: body version 2 (FSM version 4).
	Note string `json:"note,omitempty"`
}

// Alert causes of the directory.
const (
	AlertDirectoryRefresh = "directory:refresh"
	AlertDirectoryHeld    = "directory:held"
)

func (a applier) setDirectory(c SetDirectory) any {
	if c.Hash == "" || len(c.Body) == 0 {
		return errors.New("set directory: hash and body are required")
	}
	a.st.DirectoryHeld = nil
	if cur := a.st.Directory; cur != nil && cur.Hash == c.Hash {
		return nil
	}
	a.st.Directory = &DirectoryRecord{Hash: c.Hash, Source: c.Source, Body: c.Body,
		UserIDs: c.UserIDs, FetchedAt: c.FetchedAt, AppliedAt: c.Now}
	return nil
}

func (a applier) holdDirectory(c HoldDirectory) any {
	if c.Hash == "" || len(c.Body) == 0 {
		return errors.New("hold directory: hash and body are required")
	}
	if h := a.st.DirectoryHeld; h != nil && h.Hash == c.Hash {
		return nil
	}
	a.st.DirectoryHeld = &DirectoryRecord{Hash: c.Hash, Source: c.Source, Body: c.Body, UserIDs: c.UserIDs,
		FetchedAt: c.FetchedAt, AppliedAt: c.Now, Removed: c.Removed}
	before := 0
	if a.st.Directory != nil {
		before = len(a.st.Directory.UserIDs)
	}
	a.st.raise(ParseAlertCause(AlertDirectoryHeld), AlertDirectoryHeld, "", AlertParams{Count: len(c.Removed)}, fmt.Sprintf(
		"directory refresh held: it would remove %d of %d people (%s); the snapshot in force stays until an operator confirms with `herald directory confirm %s`",
		len(c.Removed), before, sample(c.Removed, 5), c.Hash), c.Now)
	return nil
}

func (a applier) confirmDirectory(c ConfirmDirectory) any {
	h := a.st.DirectoryHeld
	if h == nil {
		return ErrNoHeldDirectory
	}
	if c.Hash != "" && c.Hash != h.Hash {
		return fmt.Errorf("%w: held %s, confirmed %s", ErrHeldDirectoryMismatch, h.Hash, c.Hash)
	}
	n := *h
	n.Removed, n.AppliedAt, n.ConfirmedBy, n.ConfirmedAt, n.ConfirmNote = nil, c.Now, c.By, c.Now, c.Note
	a.st.Directory, a.st.DirectoryHeld = &n, nil
	return &n
}

// sample lists up to n ids, with how many more there are.
func sample(ids []string, n int) string {
	if len(ids) <= n {
		return fmt.Sprint(ids)
	}
	return fmt.Sprintf("%v and %d more", ids[:n], len(ids)-n)
}

// Directory returns the snapshot in force and the one held, if any.
// Records are never mutated: the caller may keep them.
func (f *FSM) Directory() (current, held *DirectoryRecord) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.Directory, f.st.DirectoryHeld
}

// RemovedFrom lists the userids of cur (sorted) missing from next
// (sorted).
func RemovedFrom(cur, next []string) []string {
	var out []string
	for _, id := range cur {
		if _, found := slices.BinarySearch(next, id); !found {
			out = append(out, id)
		}
	}
	return out
}
