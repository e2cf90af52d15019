package enginetest

import (
	"context"
	"sync"
	"time"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// Sender is a channel that admits everything at once and sends every
// message it is given, recording each in order; FailNext makes the next
// sends answer retryable instead. The zero Sender is ready to use.
type Sender struct {
	mu   sync.Mutex
	sent []heraldtype.Message
	fail int
}

// Admit never makes a message wait.
func (*Sender) Admit(string, string, heraldtype.Priority, time.Time) time.Duration { return 0 }

// Send records and sends each message of batch (its provider id is "p-"
// and its id), but answers the first ones retryable while FailNext's
// count lasts; those are not recorded.
func (s *Sender) Send(_ context.Context, _ string, batch []heraldtype.Message) ([]heraldtype.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]heraldtype.Result, len(batch))
	for i, m := range batch {
		if s.fail > 0 {
			s.fail--
			out[i] = heraldtype.Result{ID: m.ID, Status: heraldtype.StatusRetryable, Error: "busy"}
			continue
		}
		s.sent = append(s.sent, m)
		out[i] = heraldtype.Result{ID: m.ID, Status: heraldtype.StatusSent, ProviderID: "p-" + m.ID}
	}
	return out, nil
}

// FailNext makes the next n messages answer retryable.
func (s *Sender) FailNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = n
}

// Sent returns the messages sent so far, in order.
func (s *Sender) Sent() []heraldtype.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]heraldtype.Message(nil), s.sent...)
}

// Sends says how many times a message with idempotency key key was sent.
func (s *Sender) Sends(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.sent {
		if m.IdempotencyKey == key {
			n++
		}
	}
	return n
}

// Count returns how many idempotency keys were sent, and how many sends
// there were in all.
func (s *Sender) Count() (keys, sends int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, m := range s.sent {
		seen[m.IdempotencyKey] = true
	}
	return len(seen), len(s.sent)
}
