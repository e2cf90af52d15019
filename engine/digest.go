package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Digests: a rule with digest = { window = … } has its deliveries planned
// for the end of a window aligned on the clock (DigestRelease). When the
// window ends, the leader groups the due deliveries of the rule to each
// person, builds one message for each group of two or more with the rule's
// digest.message (outside Apply), and proposes FoldDigest. Apply checks the
// group against the replicated state and makes the digest a delivery of its
// own, which is claimed, sent, retried and expired like any other, under its
// own id as idempotency key; the members wait, out of the due index, and
// end as the digest ends.

// FoldDigest folds pending deliveries of one rule to one person into one
// digest delivery with Payload, the message the leader built from them.
// Apply refuses the whole fold (ErrDigestStale) unless every member is
// still pending, never attempted nor retried by hand, not folded, and of the same rule,
// recipient and channel: the message lists exactly its members. ID must
// be DigestID of the members, so two leaders folding the same deliveries
// propose the same digest, and the second changes nothing.
type FoldDigest struct {
	ID      string          `json:"id"`
	Members []string        `json:"members"`
	Payload json.RawMessage `json:"payload"`
	Now     time.Time       `json:"now"`
}

// ErrDigestStale means a member of a FoldDigest was sent, claimed, cancelled or
// folded since the leader grouped it; the leader groups again.
var ErrDigestStale = errors.New("digest members changed")

// DigestID is the id (and idempotency key) of the digest of rule to
// recipient made of the deliveries members, in any order.
func DigestID(rule, recipient string, members []string) string {
	ms := slices.Sorted(slices.Values(members))
	h := sha256.Sum256([]byte("digest\x00" + rule + "\x00" + recipient + "\x00" + strings.Join(ms, "\x00")))
	return hex.EncodeToString(h[:16])
}

// DigestRunKey is the run key a digest delivery is filed under: it belongs
// to no run of its own (its members do).
func DigestRunKey(id string) string { return "digest:" + id }

func (a applier) foldDigest(c FoldDigest) any {
	if _, ok := a.st.Deliveries.Get(c.ID); ok {
		return nil // folded before, by this or an earlier leader
	}
	if len(c.Members) < 2 {
		return fmt.Errorf("fold digest %s: a digest has two members or more, got %d", c.ID, len(c.Members))
	}
	first, ok := a.st.Deliveries.Get(c.Members[0])
	if !ok {
		return fmt.Errorf("%w: no delivery %s", ErrDigestStale, c.Members[0])
	}
	if want := DigestID(first.Rule, first.Recipient, c.Members); c.ID != want {
		return fmt.Errorf("fold digest: id %s is not the id of its members (%s)", c.ID, want)
	}
	dg := &Delivery{
		ID: c.ID, RunKey: DigestRunKey(c.ID), Rule: first.Rule, Slot: first.Slot, Recipient: first.Recipient,
		Channel: first.Channel, Payload: c.Payload, Priority: first.Priority, NotBefore: first.NotBefore,
		Deadline: first.Deadline, Retry: first.Retry, NoRetry: first.NoRetry, State: StatePending,
		Members: slices.Sorted(slices.Values(c.Members)),
	}
	members := make([]*Delivery, 0, len(c.Members))
	for _, id := range dg.Members {
		m, ok := a.st.Deliveries.Get(id)
		switch {
		case !ok:
			return fmt.Errorf("%w: no delivery %s", ErrDigestStale, id)
		case m.State != StatePending || m.Attempts > 0 || m.Retries > 0 || m.Digest != "" || len(m.Members) > 0:
			return fmt.Errorf("%w: delivery %s is %s (attempts %d, digest %q)", ErrDigestStale, id, m.State, m.Attempts, m.Digest)
		case m.Rule != dg.Rule || m.Recipient != dg.Recipient || m.Channel != dg.Channel:
			return fmt.Errorf("fold digest %s: delivery %s is of %s to %s on %s, not %s to %s on %s",
				c.ID, id, m.Rule, m.Recipient, m.Channel, dg.Rule, dg.Recipient, dg.Channel)
		}
		members = append(members, m)
		// The digest goes as soon as its last member may, and no later
		// than its first member must.
		if m.Slot.Before(dg.Slot) {
			dg.Slot = m.Slot
		}
		if m.NotBefore.After(dg.NotBefore) {
			dg.NotBefore = m.NotBefore
		}
		if !m.Deadline.IsZero() && (dg.Deadline.IsZero() || m.Deadline.Before(dg.Deadline)) {
			dg.Deadline = m.Deadline
		}
		dg.Priority = min(dg.Priority, m.Priority)
	}
	a.st.putDelivery(dg)
	for _, m := range members {
		nm := *m
		nm.Digest = c.ID
		a.st.putDelivery(&nm)
	}
	return nil
}

// settleDigest ends the members of d, a digest that just ended, as d
// ended: sent (with its provider id), or failed or expired (each
// compensated, counted and remembered as a missed slot, as if it had
// failed alone; the alert was raised once, for the digest).
func (a applier) settleDigest(d *Delivery) {
	if len(d.Members) == 0 || !d.State.Final() {
		return
	}
	for _, id := range d.Members {
		m, ok := a.st.Deliveries.Get(id)
		if !ok || m.State.Final() || m.Digest != d.ID {
			continue
		}
		nm := *m
		nm.State, nm.Attempts, nm.EndedAt = d.State, d.Attempts, d.EndedAt
		nm.Code, nm.LastError, nm.ProviderID = d.Code, d.LastError, d.ProviderID
		switch d.State {
		case StateSent:
			nm.SentAt = d.SentAt
			a.madeGood(&nm)
			a.count(&nm)
		case StateFailed, StateExpired:
			nm.LastError = "digest " + d.ID + " " + d.State.String() + ": " + d.LastError
			a.failed(&nm)
		default:
			a.count(&nm)
		}
		a.st.putDelivery(&nm)
	}
}
