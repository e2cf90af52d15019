// Package mock is a channel that delivers to a file: every accepted message
// becomes one JSON line in its outbox. It deduplicates by idempotency key
// (a repeated key is recorded with duplicate=true, not delivered again) and
// has knobs that inject the faults engine and cluster tests need (see
// Config). It runs in-process or, as the built-in plugin "mock", behind the
// same go-plugin boundary as any channel.
package mock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/heraldhq/herald/plugins/sdk"
)

// Version is the mock channel's version, as Info reports it.
const Version = "1.0.0"

// ErrNotConfigured is returned by Send before a successful Configure.
var ErrNotConfigured = errors.New("mock: not configured")

// Channel is the mock channel. It is safe for concurrent use.
type Channel struct {
	// ExitFunc ends the process for crash_after_n; default os.Exit. Tests
	// running the mock in-process replace it.
	ExitFunc func(code int)
	// NowFunc stamps received_at; default time.Now.
	NowFunc func() time.Time
	// Logger receives the channel's own log lines; default sdk.Logger().
	Logger *slog.Logger

	mu       sync.Mutex
	cfg      Config
	out      *outbox
	rng      *rand.Rand
	received int // messages received by this process since Configure
}

// New returns an unconfigured mock channel.
func New() *Channel { return &Channel{} }

// Info implements sdk.Channel. Limits are those of the configuration, so
// they are known only after Configure.
func (c *Channel) Info(ctx context.Context) (sdk.Info, error) {
	if err := ctx.Err(); err != nil {
		return sdk.Info{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	info := sdk.Info{Name: "mock", Version: Version}
	for _, l := range c.cfg.Limits {
		info.Limits = append(info.Limits, sdk.Limit{Scope: l.Scope, Count: l.Count, Per: time.Duration(l.Per)})
	}
	return info, nil
}

// Configure implements sdk.Channel: it opens the outbox and rebuilds the
// set of delivered keys from it, so deduplication survives restarts.
func (c *Channel) Configure(ctx context.Context, raw json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cfg, err := parseConfig(raw)
	if err != nil {
		return err
	}
	out, err := openOutbox(cfg.Outbox)
	if err != nil {
		return err
	}
	if err := out.lockAndCatchUp(); err != nil {
		_ = out.close()
		return err
	}
	if err := out.unlock(); err != nil {
		_ = out.close()
		return fmt.Errorf("mock: unlock outbox: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.out != nil {
		_ = c.out.close()
	}
	c.cfg, c.out, c.received = cfg, out, 0
	c.rng = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed))
	c.logger().Info("mock configured", "channel", cfg.Channel, "outbox", cfg.Outbox, "delivered_before", out.count)
	return nil
}

// Send implements sdk.Channel.
func (c *Channel) Send(ctx context.Context, batch []sdk.Message) ([]sdk.Result, error) {
	c.mu.Lock()
	delay := time.Duration(c.cfg.SendDelay)
	c.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.out == nil {
		return nil, ErrNotConfigured
	}
	if len(batch) == 0 {
		return []sdk.Result{}, nil
	}
	if err := c.out.lockAndCatchUp(); err != nil {
		return nil, err
	}
	defer func() { _ = c.out.unlock() }()

	now := c.now().UTC()
	results := make([]sdk.Result, 0, len(batch))
	var lines []byte
	// The batch's keys count as delivered only once their lines are
	// written: after a failed write the retry is the delivery, not a
	// duplicate of one that never happened.
	delivered := map[string]bool{}
	for _, m := range batch {
		r, line, crash := c.judge(m, now, delivered)
		results = append(results, r)
		lines = append(lines, line...)
		if crash {
			// Make what was written so far durable, then die before
			// answering: the host sees a broken batch.
			if c.out.append(lines) == nil {
				c.out.remember(delivered)
			}
			c.logger().Warn("mock crashing as configured", "crash_after_n", c.cfg.CrashAfterN)
			c.exit(3)
			return nil, errors.New("mock: crashed (crash_after_n)")
		}
	}
	if err := c.out.append(lines); err != nil {
		return nil, err
	}
	c.out.remember(delivered)
	return results, nil
}

// judge decides one message's fate and returns its outbox line (nil when
// it was not accepted) and whether the process must crash now. delivered
// holds the keys delivered earlier in the batch, and gets m's.
func (c *Channel) judge(m sdk.Message, now time.Time, delivered map[string]bool) (sdk.Result, []byte, bool) {
	c.received++
	r := sdk.Result{ID: m.ID}
	switch {
	case m.IdempotencyKey == "":
		r.Status, r.Code, r.Error = sdk.StatusPermanent, "mock_no_key", "message has no idempotency key"
		return r, nil, false
	case !json.Valid(m.Payload):
		r.Status, r.Code, r.Error = sdk.StatusPermanent, "mock_bad_payload", "payload is not valid JSON"
		return r, nil, false
	case slices.Contains(c.cfg.PermanentFor, m.Recipient):
		r.Status, r.Code, r.Error = sdk.StatusPermanent, "mock_permanent", "recipient is in permanent_for"
		return r, nil, false
	case slices.Contains(c.cfg.RateLimitedFor, m.Recipient):
		r.Status, r.Code, r.Error = sdk.StatusRateLimited, "mock_rate_limited", "recipient is in rate_limited_for"
		r.RetryAfter = time.Duration(c.cfg.RetryAfter)
		return r, nil, false
	case c.received <= c.cfg.FailFirstN:
		r.Status, r.Code, r.Error = sdk.StatusRetryable, "mock_fail_first_n", "failing the first messages as configured"
		return r, nil, false
	case c.cfg.FailRate > 0 && c.rng.Float64() < c.cfg.FailRate:
		r.Status, r.Code, r.Error = sdk.StatusRetryable, "mock_fail_rate", "random failure as configured"
		return r, nil, false
	}

	dup := c.out.seen[m.IdempotencyKey] || delivered[m.IdempotencyKey]
	rec := Record{
		Key:        m.IdempotencyKey,
		ID:         m.ID,
		Recipient:  m.Recipient,
		Channel:    c.cfg.Channel,
		Payload:    m.Payload,
		Attempt:    m.Attempt,
		ReceivedAt: now.In(c.cfg.loc),
		Duplicate:  dup,
	}
	line, err := json.Marshal(rec)
	if err != nil { // cannot happen: the payload was checked above
		r.Status, r.Code, r.Error = sdk.StatusPermanent, "mock_encode", err.Error()
		return r, nil, false
	}
	crash := false
	if !dup {
		delivered[m.IdempotencyKey] = true
		crash = c.cfg.CrashAfterN > 0 && c.out.count+len(delivered) == c.cfg.CrashAfterN
	}
	r.Status, r.ProviderID = sdk.StatusSent, ProviderID(m.IdempotencyKey)
	return r, append(line, '\n'), crash
}

// ProviderID is the message id the mock reports for a key: the same on
// every attempt, as a provider's duplicate check would answer.
func ProviderID(key string) string {
	h := sha256.Sum256([]byte(key))
	return "mock-" + hex.EncodeToString(h[:6])
}

// Close releases the outbox.
func (c *Channel) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.out == nil {
		return nil
	}
	err := c.out.close()
	c.out = nil
	return err
}

func (c *Channel) now() time.Time {
	if c.NowFunc != nil {
		return c.NowFunc()
	}
	return time.Now()
}

func (c *Channel) exit(code int) {
	if c.ExitFunc != nil {
		c.ExitFunc(code)
		return
	}
	os.Exit(code)
}

func (c *Channel) logger() *slog.Logger {
	if c.Logger == nil {
		c.Logger = sdk.Logger()
	}
	return c.Logger
}

var _ sdk.Channel = (*Channel)(nil)
