// Package sdk is what a channel plugin author imports: implement Channel and
// call Serve from main. Herald's host launches the plugin with go-plugin over
// gRPC and talks to it only through this interface.
package sdk

import (
	"context"
	"encoding/json"
	"time"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// ProtocolVersion is the channel protocol's version; the host refuses a
// plugin that speaks another one.
const ProtocolVersion = 1

// Channel is a delivery channel: WeCom app messages, a group robot, a mock.
type Channel interface {
	// Info names the plugin and declares the limits the host must enforce
	// on its behalf (the host keeps them across plugin restarts).
	Info(ctx context.Context) (Info, error)
	// Configure hands the plugin its channel instance's configuration, as
	// the node config gives it with ${ENV} references already resolved. It
	// is called once after every (re)start, before any Send.
	Configure(ctx context.Context, config json.RawMessage) error
	// Send delivers a batch and judges each message on its own.
	Send(ctx context.Context, batch []Message) ([]Result, error)
}

// Info describes a plugin.
type Info struct {
	Name    string
	Version string
	Limits  []Limit
}

// LimitScope says what a Limit counts.
type LimitScope string

const (
	// ScopeRecipient counts messages to one recipient through this channel.
	ScopeRecipient LimitScope = "recipient"
	// ScopeChannel counts messages through this channel instance as a whole.
	ScopeChannel LimitScope = "channel"
)

// Limit is a provider's limit as a sliding window: no span of length Per
// holds more than Count messages in Scope (WeCom's "30 per member in any
// minute"). Declare the provider's own numbers: the host keeps to the
// window (it paces with a half-burst bucket, see plugins/DESIGN.md), so a
// plugin need not leave a margin.
type Limit struct {
	Scope LimitScope
	Count int
	Per   time.Duration
}

// The values a Channel exchanges with the host are Herald's own delivery
// values (package heraldtype), under the names a plugin author knows: the
// engine, the host and every plugin share one type per concept.
type (
	// Message is one delivery for one recipient.
	Message = heraldtype.Message
	// Status is the verdict on one message. Numbers are part of the protocol.
	Status = heraldtype.Status
	// Result is the verdict on one message, matched to it by ID.
	Result = heraldtype.Result
)

// The verdicts; RetryAfter goes with StatusRateLimited.
const (
	StatusSent        = heraldtype.StatusSent        // accepted by the provider
	StatusRetryable   = heraldtype.StatusRetryable   // transient failure: try again later
	StatusRateLimited = heraldtype.StatusRateLimited // provider limit: wait RetryAfter, no attempt spent
	StatusPermanent   = heraldtype.StatusPermanent   // will never succeed
	StatusConfig      = heraldtype.StatusConfig      // channel misconfigured: permanent, alert the operator
)
