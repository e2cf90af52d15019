package engine

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"
	"unique"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// Records kept in the replicated state. Once stored, a record is never
// mutated in place: an update stores a modified copy. That lets Snapshot
// capture the state by copying maps of pointers while Apply goes on.

// RunState is where a run stands.
type RunState uint8

// Append-only: run states are replicated.
const (
	// RunPlanning: the slot is claimed; its deliveries are being planned
	// and replicated. A new leader that finds a run here plans it again.
	RunPlanning RunState = 1
	// RunPlanned: every delivery of the run is in the state.
	RunPlanned RunState = 2
	// RunFailed: the rule failed at plan time (error kept, alert raised).
	RunFailed RunState = 3
	// RunSkipped: the slot was missed beyond the rule's catch-up window.
	RunSkipped RunState = 4
)

func (s RunState) String() string {
	switch s {
	case RunPlanning:
		return "planning"
	case RunPlanned:
		return "planned"
	case RunFailed:
		return "failed"
	case RunSkipped:
		return "skipped"
	case RunPaused:
		return "paused"
	case RunAwaitingApproval:
		return "awaiting_approval"
	case RunRejected:
		return "rejected"
	}
	return "unknown"
}

// Run is one firing of a rule: a scheduled slot or an API task.
type Run struct {
	Key     string          `json:"key"`
	Rule    string          `json:"rule"`
	Slot    time.Time       `json:"slot"`
	Zone    string          `json:"zone,omitempty"`
	TaskKey string          `json:"task_key,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	State   RunState        `json:"state"`
	Late    bool            `json:"late,omitempty"`
	Manual  bool            `json:"manual,omitempty"` // fired by hand (herald rules fire)
	// FiredBy is who fired a skipped or paused slot by hand (RefireRun).
	FiredBy string `json:"fired_by,omitempty"`
	// FireNote is what the client typed with it (FSM version 4).
	FireNote  string `json:"fire_note,omitempty"`
	Date      string `json:"date,omitempty"` // slot's date in the rule's zone
	RulesHash string `json:"rules_hash,omitempty"`
	// DirectoryHash names the directory snapshot in force when the run
	// started (stamped by Apply from the state, never by the leader): the
	// rule is planned with exactly that snapshot. "" when none.
	DirectoryHash string    `json:"directory_hash,omitempty"`
	StartedAt     time.Time `json:"started_at"`
	PlannedAt     time.Time `json:"planned_at,omitzero"`
	Planned       int       `json:"planned"`
	Error         string    `json:"error,omitempty"`
	// FiredToken is the API token (its name) that fired the run by hand,
	// recorded for a rule with an approval option only: its approval
	// must come from another token (approval.go).
	FiredToken string `json:"fired_token,omitempty"`
	// Approval is the hold of a run planned for more people than its
	// rule's approval option allows (approval.go); nil for every other.
	Approval *Approval `json:"approval,omitempty"`
}

// Claim is one attempt in flight: who sent it and until when it is theirs.
type Claim struct {
	Seq int `json:"seq"` // increases with every claim; identifies it
	// The rest is the lease; a settled delivery keeps only Seq, so that
	// the next claim's number follows on.
	Leader    string    `json:"leader,omitempty"`
	Term      uint64    `json:"term,omitempty"`
	At        time.Time `json:"at,omitzero"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// Delivery is one message for one recipient of one run.
type Delivery struct {
	ID        string              `json:"id"`
	RunKey    string              `json:"run_key"`
	Rule      string              `json:"rule"`
	Slot      time.Time           `json:"slot"`
	Recipient string              `json:"recipient"`
	Channel   string              `json:"channel"`
	Payload   json.RawMessage     `json:"payload"`
	Priority  heraldtype.Priority `json:"priority"`
	NotBefore time.Time           `json:"not_before"`
	Deadline  time.Time           `json:"deadline"`
	Retry     []time.Duration     `json:"retry,omitempty"`
	// NoRetry: the rule said retry = {} (one attempt only). A field of its
	// own because a snapshot (gob) cannot tell an empty Retry from none.
	NoRetry bool `json:"no_retry,omitempty"`

	State      DeliveryState `json:"state"`
	Attempts   int           `json:"attempts"` // attempts spent (rate limits spend none)
	NextAt     time.Time     `json:"next_at,omitzero"`
	Claim      *Claim        `json:"claim,omitempty"`
	ProviderID string        `json:"provider_id,omitempty"`
	Code       string        `json:"code,omitempty"`
	LastError  string        `json:"last_error,omitempty"`
	SentAt     time.Time     `json:"sent_at,omitzero"`
	EndedAt    time.Time     `json:"ended_at,omitzero"`
	// Retries counts the times a person sent it again by hand after it
	// failed or expired (RetryDeliveries); RetriedBy and RetriedAt are the
	// last of them.
	Retries   int       `json:"retries,omitempty"`
	RetriedBy string    `json:"retried_by,omitempty"`
	RetriedAt time.Time `json:"retried_at,omitzero"`
	// RetryNote is what the client typed with the last retry (FSM
	// version 4); RetriedBy is the verified actor.
	RetryNote string `json:"retry_note,omitempty"`
	// Failures are the attempts that did not send it, oldest first (at
	// most MaxFailures, the latest kept), so a person's page can say why
	// each one failed: LastError holds only the last. Nil in records of a
	// build that did not keep them.
	Failures []AttemptFailure `json:"failures,omitempty"`

	// Digest, on a delivery folded into a digest (FoldDigest), is the id of
	// the digest delivery it goes out in: it leaves the due index and ends
	// as its digest ends. Members, on a digest delivery, are the ids it
	// carries. Both empty in records of builds before digests.
	Digest  string   `json:"digest,omitempty"`
	Members []string `json:"members,omitempty"`

	// Recall is the request to take a sent message back and its outcome
	// (recall.go); nil when none was asked.
	Recall *Recall `json:"recall,omitempty"`

	// Clicks are the clicks on its interactive card, oldest first, each
	// with the card's update after it (card.go); at most MaxClicks.
	Clicks []CardClick `json:"clicks,omitempty"`
}

// MaxFailures bounds Delivery.Failures: a delivery rate limited all
// morning keeps its latest refusals, not hundreds.
const MaxFailures = 10

// AttemptFailure is one attempt of a delivery that did not send it, or
// one that ended it (expired).
type AttemptFailure struct {
	At      time.Time         `json:"at"`
	Attempt int               `json:"attempt"` // attempts spent after it (a rate limit spends none)
	Status  heraldtype.Status `json:"status"`  // 0 for an expiry
	Code    string            `json:"code,omitempty"`
	Error   string            `json:"error,omitempty"`
}

// withFailure returns d's failures with f added, bounded by MaxFailures.
func (d *Delivery) withFailure(f AttemptFailure) []AttemptFailure {
	out := make([]AttemptFailure, 0, min(len(d.Failures)+1, MaxFailures))
	if n := len(d.Failures) + 1 - MaxFailures; n > 0 {
		out = append(out, d.Failures[n:]...)
	} else {
		out = append(out, d.Failures...)
	}
	return append(out, f)
}

// DueAt is when the executor should next look at d: a pending delivery when
// it may be sent, a claimed one when its claim times out.
func (d *Delivery) DueAt() time.Time {
	switch d.State {
	case StatePending:
		if d.Digest != "" {
			return time.Time{} // its digest goes instead
		}
		if d.NextAt.After(d.NotBefore) {
			return d.NextAt
		}
		return d.NotBefore
	case StateClaimed:
		return d.Claim.ExpiresAt
	}
	return time.Time{}
}

// retryWait returns the wait before attempt n+1 after n attempts failed, and
// false when the attempts are exhausted.
func (d *Delivery) retryWait(n int) (time.Duration, bool) {
	waits := d.Retry
	if d.NoRetry {
		return 0, false
	}
	if waits == nil {
		waits = DefaultRetry
	}
	if n < 1 || n > len(waits) {
		return 0, false
	}
	return waits[n-1], true
}

// Alert is an operator-visible problem, deduplicated by cause.
type Alert struct {
	ID      string `json:"id"`
	Cause   string `json:"cause"`
	Rule    string `json:"rule,omitempty"`
	Message string `json:"message"`
	// Kind and Params say what it is about, for readers to word it in
	// their language; nil Params in alerts recorded before they existed
	// (those are read by their Message, Kind from their cause).
	Kind   AlertKind    `json:"kind,omitempty"`
	Params *AlertParams `json:"params,omitempty"`
	First  time.Time    `json:"first"`
	Last   time.Time    `json:"last"`
	Count  int          `json:"count"`
	Acked  bool         `json:"acked"`
	// Notified counts the times the alert was handed to the alert rule;
	// NotifiedAt is the last of them (see NotifyAlert).
	Notified   int       `json:"notified,omitempty"`
	NotifiedAt time.Time `json:"notified_at,omitzero"`
}

// Day is the date the run's statistics count under (YYYY-MM-DD).
func (r *Run) Day() string { return r.date() }

// date is the run's date for the daily aggregates: the one the leader
// stamped (in the rule's zone), else the slot's UTC date.
func (r *Run) date() string {
	if r.Date != "" {
		return r.Date
	}
	return r.Slot.UTC().Format(time.DateOnly)
}

// settledClaims are the claims settled deliveries keep (only their
// sequence), shared: records are never mutated, and most deliveries end
// after one or two claims.
var settledClaims = func() (out [8]*Claim) {
	for i := range out {
		out[i] = &Claim{Seq: i + 1}
	}
	return out
}()

// settledClaim is the claim a settled delivery keeps: the sequence only,
// so that the next claim's number follows on.
func settledClaim(seq int) *Claim {
	if seq >= 1 && seq <= len(settledClaims) {
		return settledClaims[seq-1]
	}
	return &Claim{Seq: seq}
}

// planShare lets the deliveries one AddDeliveries stores share what they
// have in common instead of a copy each: a run's messages often carry the
// same payload (one text for everyone) and retry policy, and every
// delivery names one of a few channels. Records are never mutated, so
// sharing is safe.
type planShare struct {
	payload json.RawMessage
	retry   []time.Duration
}

func (p *planShare) payloadOf(b json.RawMessage) json.RawMessage {
	if p.payload != nil && bytes.Equal(b, p.payload) {
		return p.payload
	}
	p.payload = b
	return b
}

// retryOf shares a non-empty policy; nil (the default) and empty (no
// retry) stay as they are: they mean different things.
func (p *planShare) retryOf(r []time.Duration) []time.Duration {
	if len(r) == 0 {
		return r
	}
	if slices.Equal(r, p.retry) {
		return p.retry
	}
	p.retry = r
	return r
}

// nameOf is the one copy of a name that many records carry: a channel's,
// a rule's. A million pending tasks of one rule then hold one string.
func nameOf(name string) string { return unique.Make(name).Value() }
