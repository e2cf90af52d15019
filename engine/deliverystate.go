package engine

import "fmt"

// DeliveryState is where a delivery stands. See engine/DESIGN.md.
type DeliveryState uint8

// Append-only: states are replicated and snapshotted.
const (
	// StatePending: planned and waiting for not_before / next_at. Entered by
	// AddDeliveries or a retryable result; left by Claim, Expire or Cancel.
	StatePending DeliveryState = 1
	// StateClaimed: an attempt is in flight by the leader named in the
	// claim. Left by RecordResults for that claim, or by a later Claim once
	// the claim is ambiguous (older leader, or timed out).
	StateClaimed DeliveryState = 2
	// StateSent: final; the channel accepted it.
	StateSent DeliveryState = 3
	// StateFailed: final; permanent error or attempts exhausted (alerted).
	StateFailed DeliveryState = 4
	// StateExpired: final; its deadline passed before it was sent (alerted).
	StateExpired DeliveryState = 5
	// StateCancelled: final; its task was cancelled before it was sent.
	StateCancelled DeliveryState = 6
	// StateRecalled: final; it was sent, then taken back from the
	// recipient's chat (RecallDeliveries, then RecordRecalls). Entered only
	// from sent.
	StateRecalled DeliveryState = 7
)

func (s DeliveryState) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateClaimed:
		return "claimed"
	case StateSent:
		return "sent"
	case StateFailed:
		return "failed"
	case StateExpired:
		return "expired"
	case StateCancelled:
		return "cancelled"
	case StateRecalled:
		return "recalled"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Final reports whether no further transition is possible.
func (s DeliveryState) Final() bool { return s >= StateSent }
