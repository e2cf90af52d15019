// Package conformance is the test suite of the channel contract. Every
// channel runs it, in-process and through the plugin boundary:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, func(t *testing.T) conformance.Subject {
//			return conformance.Subject{Channel: New(), Config: ..., DeliveredFunc: ...}
//		})
//	}
package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
)

// Subject is one channel under test, fresh for every check.
type Subject struct {
	// Channel is the channel, not yet configured: in-process or an
	// *sdk.Client of a launched plugin.
	Channel sdk.Channel
	// Config is a configuration under which Recipient and Payload are
	// delivered.
	Config json.RawMessage
	// BadConfigs are configurations Configure must refuse, besides the
	// malformed JSON the suite always tries.
	BadConfigs []json.RawMessage
	// Recipient is a recipient the channel delivers to. Default "alice".
	Recipient string
	// Payload is a message body the channel accepts. Default
	// {"msgtype":"text","text":{"content":"conformance"}}.
	Payload json.RawMessage
	// DeliveredFunc reports how many times the channel really delivered
	// the message with idempotency key key (not counting a repeat it
	// recognised as one). Required.
	DeliveredFunc func(t *testing.T, key string) int
	// RestartFunc returns a fresh, unconfigured instance of the channel
	// that delivers to the same place as Channel: what the host gets when
	// it restarts a crashed plugin (through the plugin boundary: a new
	// process). Optional; without it SameKeyAfterRestart is skipped, and a
	// channel that cannot keep a key from being delivered twice across a
	// restart should say so in its docs.
	RestartFunc func(t *testing.T) sdk.Channel
}

// Timeout bounds every call the suite makes.
const Timeout = 10 * time.Second

// Run runs the suite. newSubject is called once per check.
func Run(t *testing.T, newSubject func(t *testing.T) Subject) {
	checks := []struct {
		name string
		f    func(t *testing.T, s Subject)
	}{
		{"InfoIsSane", infoIsSane},
		{"ConfigureRefusesBadConfig", configureRefusesBadConfig},
		{"ConfigureTwice", configureTwice},
		{"EmptyBatch", emptyBatch},
		{"ResultsMatchIDs", resultsMatchIDs},
		{"SameKeyDeliveredOnce", sameKeyDeliveredOnce},
		{"SameKeyAfterRestart", sameKeyAfterRestart},
		{"CancelledContext", cancelledContext},
		{"ConcurrentSends", concurrentSends},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			s := newSubject(t)
			require.NotNil(t, s.Channel, "Subject.Channel")
			require.NotNil(t, s.DeliveredFunc, "Subject.DeliveredFunc")
			if s.Recipient == "" {
				s.Recipient = "alice"
			}
			if s.Payload == nil {
				s.Payload = json.RawMessage(`{"msgtype":"text","text":{"content":"conformance"}}`)
			}
			c.f(t, s)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return c
}

func configure(t *testing.T, s Subject) {
	require.NoError(t, s.Channel.Configure(ctx(t), s.Config), "Configure with the subject's Config")
}

// batch makes n messages with keys and ids unique to the test.
func batch(t *testing.T, s Subject, n int) []sdk.Message {
	out := make([]sdk.Message, n)
	for i := range out {
		out[i] = sdk.Message{
			ID:             fmt.Sprintf("%s/id-%d", t.Name(), i),
			IdempotencyKey: fmt.Sprintf("%s/key-%d", t.Name(), i),
			Recipient:      s.Recipient,
			Payload:        s.Payload,
			Attempt:        1,
		}
	}
	return out
}

func infoIsSane(t *testing.T, s Subject) {
	for _, when := range []string{"before Configure", "after Configure"} {
		info, err := s.Channel.Info(ctx(t))
		require.NoError(t, err, when)
		require.NotEmpty(t, info.Name, "Info.Name %s", when)
		for i, l := range info.Limits {
			require.Contains(t, []sdk.LimitScope{sdk.ScopeRecipient, sdk.ScopeChannel}, l.Scope, "limit %d scope %s", i, when)
			require.Positive(t, l.Count, "limit %d count %s", i, when)
			require.GreaterOrEqual(t, l.Per, time.Millisecond, "limit %d per %s (the protocol carries milliseconds)", i, when)
		}
		if when == "before Configure" {
			configure(t, s)
		}
	}
}

func configureRefusesBadConfig(t *testing.T, s Subject) {
	bad := append([]json.RawMessage{json.RawMessage(`{`), json.RawMessage(`[]`)}, s.BadConfigs...)
	for _, c := range bad {
		err := s.Channel.Configure(ctx(t), c)
		require.Error(t, err, "Configure(%s) must fail", c)
		require.NotEmpty(t, err.Error(), "Configure(%s) error must say why", c)
	}
	// A good configuration still works after bad ones.
	configure(t, s)
	res, err := s.Channel.Send(ctx(t), batch(t, s, 1))
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, sdk.StatusSent, res[0].Status, "result %+v", res[0])
}

func configureTwice(t *testing.T, s Subject) {
	// The host configures again after every restart.
	configure(t, s)
	configure(t, s)
	msgs := batch(t, s, 1)
	res, err := s.Channel.Send(ctx(t), msgs)
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, sdk.StatusSent, res[0].Status, "result %+v", res[0])
	require.Equal(t, 1, s.DeliveredFunc(t, msgs[0].IdempotencyKey))
}

func emptyBatch(t *testing.T, s Subject) {
	configure(t, s)
	for _, b := range [][]sdk.Message{nil, {}} {
		res, err := s.Channel.Send(ctx(t), b)
		require.NoError(t, err, "an empty batch is not an error")
		require.Empty(t, res)
	}
}

func resultsMatchIDs(t *testing.T, s Subject) {
	configure(t, s)
	msgs := batch(t, s, 5)
	res, err := s.Channel.Send(ctx(t), msgs)
	require.NoError(t, err)
	require.Len(t, res, len(msgs), "one result per message")
	seen := map[string]bool{}
	for _, r := range res {
		require.False(t, seen[r.ID], "two results for id %q", r.ID)
		seen[r.ID] = true
		require.Equal(t, sdk.StatusSent, r.Status, "result %+v", r)
		require.Empty(t, r.Error, "a sent message has no error")
	}
	for _, m := range msgs {
		require.True(t, seen[m.ID], "no result for id %q", m.ID)
		require.Equal(t, 1, s.DeliveredFunc(t, m.IdempotencyKey), "key %q", m.IdempotencyKey)
	}
}

func sameKeyDeliveredOnce(t *testing.T, s Subject) {
	configure(t, s)
	first := batch(t, s, 1)
	res, err := s.Channel.Send(ctx(t), first)
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, sdk.StatusSent, res[0].Status, "result %+v", res[0])

	// A new leader sends the ambiguous delivery again: same key, same id,
	// next attempt. It must be reported sent and not delivered twice.
	again := first[0]
	again.Attempt = 2
	res2, err := s.Channel.Send(ctx(t), []sdk.Message{again})
	require.NoError(t, err)
	require.Len(t, res2, 1)
	require.Equal(t, again.ID, res2[0].ID)
	require.Equal(t, sdk.StatusSent, res2[0].Status, "a repeat of a delivered key is reported sent: %+v", res2[0])
	require.Equal(t, 1, s.DeliveredFunc(t, again.IdempotencyKey), "same key delivered twice")
}

func sameKeyAfterRestart(t *testing.T, s Subject) {
	if s.RestartFunc == nil {
		t.Skip("the subject has no RestartFunc")
	}
	configure(t, s)
	first := batch(t, s, 2)
	res, err := s.Channel.Send(ctx(t), first)
	require.NoError(t, err)
	require.Len(t, res, 2)
	for _, r := range res {
		require.Equal(t, sdk.StatusSent, r.Status, "result %+v", r)
	}

	// The plugin crashed after delivering, before the host heard back: the
	// host restarts it, configures it and sends the batch again.
	fresh := s.RestartFunc(t)
	require.NotNil(t, fresh, "RestartFunc")
	require.NoError(t, fresh.Configure(ctx(t), s.Config), "Configure after restart")
	again := make([]sdk.Message, len(first))
	for i, m := range first {
		m.Attempt = 2
		again[i] = m
	}
	res2, err := fresh.Send(ctx(t), again)
	require.NoError(t, err)
	require.Len(t, res2, len(again))
	for _, r := range res2 {
		require.Equal(t, sdk.StatusSent, r.Status, "a repeat after a restart is reported sent: %+v", r)
	}
	for _, m := range first {
		require.Equal(t, 1, s.DeliveredFunc(t, m.IdempotencyKey), "key %q delivered twice across a restart", m.IdempotencyKey)
	}
}

func cancelledContext(t *testing.T, s Subject) {
	configure(t, s)
	c, cancel := context.WithCancel(context.Background())
	cancel()
	msgs := batch(t, s, 2)
	done := make(chan error, 1)
	go func() {
		_, err := s.Channel.Send(c, msgs)
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err, "Send with a cancelled context must fail")
		require.True(t, errors.Is(err, context.Canceled), "want context.Canceled, got %v", err)
	case <-time.After(Timeout):
		t.Fatal("Send ignored its cancelled context")
	}
	for _, m := range msgs {
		require.Zero(t, s.DeliveredFunc(t, m.IdempotencyKey), "a send cancelled before it began delivered %q", m.IdempotencyKey)
	}
}

func concurrentSends(t *testing.T, s Subject) {
	configure(t, s)
	const senders, per = 4, 3
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	all := make([][]sdk.Message, senders)
	for g := range senders {
		all[g] = batch(t, s, per)
		for i := range all[g] {
			all[g][i].ID = fmt.Sprintf("%s-g%d", all[g][i].ID, g)
			all[g][i].IdempotencyKey = fmt.Sprintf("%s-g%d", all[g][i].IdempotencyKey, g)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Channel.Send(ctx(t), all[g])
			if err == nil && len(res) != per {
				err = fmt.Errorf("sender %d: %d results for %d messages", g, len(res), per)
			}
			for _, r := range res {
				if err == nil && r.Status != sdk.StatusSent {
					err = fmt.Errorf("sender %d: result %+v", g, r)
				}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, msgs := range all {
		for _, m := range msgs {
			require.Equal(t, 1, s.DeliveredFunc(t, m.IdempotencyKey), "key %q", m.IdempotencyKey)
		}
	}
}
