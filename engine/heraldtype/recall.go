package heraldtype

import "time"

// RecallMessage asks a channel to take back one message it sent (WeCom's
// message/recall).
type RecallMessage struct {
	ID         string    // delivery id
	ProviderID string    // the provider's message id, as the send's Result gave it
	Recipient  string    // userid, or as the channel defines it
	SentAt     time.Time // when the channel accepted it
}

// RecallStatus is a channel's verdict on one recall. The numbers are part
// of the channel protocol and are replicated (RecordRecalls): append only.
type RecallStatus uint8

// The verdicts.
const (
	RecallDone          RecallStatus = 1 // taken back
	RecallNotRecallable RecallStatus = 2 // can never be taken back (a robot's, too old, another app's)
	RecallRetryable     RecallStatus = 3 // transient failure: ask again later
)

// Known reports whether s is one of the verdicts above.
func (s RecallStatus) Known() bool { return s >= RecallDone && s <= RecallRetryable }

// RecallResult is a channel's verdict on one recall, matched by ID.
type RecallResult struct {
	ID     string
	Status RecallStatus
	Code   string // provider error code, verbatim
	Error  string // provider error text, verbatim; never a secret
}
