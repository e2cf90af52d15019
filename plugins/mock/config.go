package mock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhq/herald/plugins/sdk"
)

// Config is the mock channel's configuration: the keys of its channel
// instance in the node YAML. Every key but outbox is a test knob for
// injecting faults; all default to off.
type Config struct {
	// Channel is the instance name; the host sets it.
	Channel string `json:"channel"`
	// Outbox is the JSON-lines file every accepted message is appended to.
	// Required.
	Outbox string `json:"outbox"`

	// FailFirstN answers the first N messages this process receives (after
	// each start) with StatusRetryable, code "mock_fail_first_n".
	FailFirstN int `json:"fail_first_n"`
	// FailRate answers this fraction (0..1) of messages with
	// StatusRetryable, code "mock_fail_rate", drawn from Seed.
	FailRate float64 `json:"fail_rate"`
	// Seed seeds FailRate's draws; 0 means 1.
	Seed uint64 `json:"seed"`
	// CrashAfterN exits the process (code 3) right after the N-th delivered
	// (non-duplicate) message was written and flushed to the outbox, in the
	// middle of its batch and before answering. The count comes from the
	// outbox, so it crashes once per outbox, not once per start.
	CrashAfterN int `json:"crash_after_n"`
	// PermanentFor answers messages to these recipients with
	// StatusPermanent, code "mock_permanent".
	PermanentFor []string `json:"permanent_for"`
	// RateLimitedFor answers messages to these recipients with
	// StatusRateLimited, code "mock_rate_limited", and RetryAfter.
	RateLimitedFor []string `json:"rate_limited_for"`
	// RetryAfter goes with RateLimitedFor; default 1s.
	RetryAfter Duration `json:"retry_after"`
	// NoRecall makes the mock answer every recall "not recallable", as a
	// channel without recall (a group robot) would.
	NoRecall bool `json:"no_recall"`
	// SendDelay makes every Send wait this long before it does anything
	// (cancellation cuts the wait short, and then nothing is recorded).
	SendDelay Duration `json:"send_delay"`
	// Limits are declared by Info once configured, for testing the host's
	// rate limits.
	Limits []LimitConfig `json:"limits"`
	// Secret is accepted and ignored: a stand-in for a credential, for
	// testing that the host never shows one.
	Secret string `json:"secret"`
	// FailConfigure makes Configure fail with an error that quotes the
	// whole configuration, for testing that the host redacts secrets.
	FailConfigure bool `json:"fail_configure"`
	// Timezone is the IANA zone received_at is written in; default the
	// process's zone. A node sets it to its display_timezone, so the outbox
	// reads on the same clock as every other screen.
	Timezone string `json:"timezone"`

	loc *time.Location
}

// LimitConfig is an sdk.Limit in the configuration.
type LimitConfig struct {
	Scope sdk.LimitScope `json:"scope"`
	Count int            `json:"count"`
	Per   Duration       `json:"per"`
}

// Duration reads "1.5s" style strings (time.ParseDuration).
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string like \"1s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("mock: bad config")

func parseConfig(raw json.RawMessage) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if c.FailConfigure {
		return Config{}, fmt.Errorf("%w: fail_configure is set (config: %s)", ErrConfig, raw)
	}
	if c.Outbox == "" {
		return Config{}, fmt.Errorf("%w: outbox is required", ErrConfig)
	}
	if c.FailFirstN < 0 || c.CrashAfterN < 0 {
		return Config{}, fmt.Errorf("%w: fail_first_n and crash_after_n must not be negative", ErrConfig)
	}
	if c.FailRate < 0 || c.FailRate > 1 {
		return Config{}, fmt.Errorf("%w: fail_rate %v is outside 0..1", ErrConfig, c.FailRate)
	}
	if c.RetryAfter < 0 || c.SendDelay < 0 {
		return Config{}, fmt.Errorf("%w: retry_after and send_delay must not be negative", ErrConfig)
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = Duration(time.Second)
	}
	c.loc = time.Local
	if c.Timezone != "" {
		loc, err := time.LoadLocation(c.Timezone)
		if err != nil {
			return Config{}, fmt.Errorf("%w: timezone %q: %v", ErrConfig, c.Timezone, err)
		}
		c.loc = loc
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	for i, l := range c.Limits {
		if l.Scope != sdk.ScopeRecipient && l.Scope != sdk.ScopeChannel {
			return Config{}, fmt.Errorf("%w: limits[%d]: scope %q: want %q or %q", ErrConfig, i, l.Scope, sdk.ScopeRecipient, sdk.ScopeChannel)
		}
		if l.Count <= 0 || l.Per <= 0 {
			return Config{}, fmt.Errorf("%w: limits[%d]: count and per must be positive", ErrConfig, i)
		}
	}
	return c, nil
}
