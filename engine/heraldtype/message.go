package heraldtype

import (
	"encoding/json"
	"time"
)

// Message is one delivery handed to a channel for one recipient.
type Message struct {
	ID             string          // delivery id
	IdempotencyKey string          // the same on every attempt, by every leader
	Recipient      string          // userid, or as the channel defines it
	Payload        json.RawMessage // the message body the rule produced
	Attempt        int             // 1 for the first attempt
}

// Status is a channel's verdict on one message. The numbers are part of
// the channel protocol and are replicated (RecordResults, a delivery's
// failed attempts): append only.
type Status uint8

// The verdicts; RetryAfter goes with StatusRateLimited.
const (
	StatusSent        Status = 1 // accepted by the provider; ProviderID set when known
	StatusRetryable   Status = 2 // transient failure: spend an attempt, back off
	StatusRateLimited Status = 3 // provider limit: wait RetryAfter, no attempt spent
	StatusPermanent   Status = 4 // will never succeed for this message
	StatusConfig      Status = 5 // channel misconfigured: permanent, alert the operator now
)

// Known reports whether s is one of the verdicts above. Anything else from
// a plugin is a bad answer, never a verdict.
func (s Status) Known() bool { return s >= StatusSent && s <= StatusConfig }

// Result is a channel's verdict on one message, matched to it by ID. It is
// what a channel answers, not what the engine records: the engine's
// settlement of a claim (engine.Settlement) adds which claim it answers.
type Result struct {
	ID         string
	Status     Status
	ProviderID string        // the provider's message id, when it gives one
	RetryAfter time.Duration // with StatusRateLimited (and optionally Retryable)
	Code       string        // provider error code, verbatim
	Error      string        // provider error text, verbatim; never a secret
}
