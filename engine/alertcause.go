package engine

import (
	"strings"
	"time"
)

// AlertKind says what an alert is about. Readers (the dashboard in each
// language, the ops_alert rule, the CLI) build their words from the kind
// and AlertParams; nobody parses an English sentence back.
type AlertKind string

// The kinds of alert; each one's cause key is "prefix:subject" (see
// AlertCause), the form the first builds wrote, so alert ids stay the same.
const (
	AlertDeliveryFailed    AlertKind = "delivery_failed"    // failed:RUN
	AlertDeliveryExpired   AlertKind = "delivery_expired"   // expired:RUN
	AlertSlotSkipped       AlertKind = "slot_skipped"       // skipped:RULE
	AlertChannelConfig     AlertKind = "channel_config"     // channel-config:CHANNEL
	AlertSendStuck         AlertKind = "send_stuck"         // stuck:CHANNEL
	AlertRuleError         AlertKind = "rule_error"         // rule-error:RUN
	AlertRunLate           AlertKind = "run_late"           // late-run:RUN
	AlertCompensationError AlertKind = "compensation_error" // on-failed:RULE
	AlertQuietExpired      AlertKind = "quiet_expired"      // quiet-expired:RUN
	AlertRulesMismatch     AlertKind = "rules_mismatch"     // rules-mismatch
	AlertRuleBroken        AlertKind = "rule_broken"        // rule-broken:FILE
	AlertChannelDown       AlertKind = "channel_down"       // channel-down:CHANNEL
	AlertDirectory         AlertKind = "directory"          // directory:held, directory:refresh
	AlertDigestError       AlertKind = "digest_error"       // digest-error:RULE
	AlertClockSkew         AlertKind = "clock_skew"         // clock-skew
	AlertDiskWrite         AlertKind = "disk_write"         // disk-write:NODE
	AlertEventError        AlertKind = "event_error"        // on-event:RULE, kf-sync:CHANNEL
	AlertApproval          AlertKind = "approval"           // approval:RUN
)

// causePrefixes maps each kind to the prefix of its cause key.
var causePrefixes = map[AlertKind]string{
	AlertDeliveryFailed: "failed", AlertDeliveryExpired: "expired", AlertSlotSkipped: "skipped",
	AlertChannelConfig: "channel-config", AlertSendStuck: "stuck", AlertRuleError: "rule-error",
	AlertRunLate: "late-run", AlertCompensationError: "on-failed", AlertQuietExpired: "quiet-expired",
	AlertRulesMismatch: "rules-mismatch", AlertRuleBroken: "rule-broken", AlertChannelDown: "channel-down",
	AlertDirectory: "directory", AlertDigestError: "digest-error", AlertClockSkew: "clock-skew",
	AlertDiskWrite: "disk-write", AlertEventError: "on-event", AlertApproval: "approval",
}

// AlertCause identifies what an alert is about: one alert per cause.
type AlertCause struct {
	Kind    AlertKind
	Subject string // the run key, rule, channel or file it is about
}

// Key is the cause as alerts are keyed and identified (AlertID).
func (c AlertCause) Key() string {
	p, ok := causePrefixes[c.Kind]
	if !ok {
		p = string(c.Kind)
	}
	if c.Subject == "" {
		return p
	}
	return p + ":" + c.Subject
}

// ParseAlertCause reads a cause key, for alerts recorded before kinds
// were (RaiseAlert body version 1, old snapshots). A key of no known
// kind has the kind "" and the whole key as its subject.
func ParseAlertCause(key string) AlertCause {
	prefix, subject, _ := strings.Cut(key, ":")
	for k, p := range causePrefixes {
		if p == prefix {
			return AlertCause{Kind: k, Subject: subject}
		}
	}
	return AlertCause{Subject: key}
}

// AlertParams are the facts of an alert's latest occurrence that its
// text is built from; each kind fills the ones it has.
type AlertParams struct {
	Run       string        `json:"run,omitempty"`
	Slot      time.Time     `json:"slot,omitzero"`
	Recipient string        `json:"recipient,omitempty"`
	Channel   string        `json:"channel,omitempty"`
	File      string        `json:"file,omitempty"`
	Code      string        `json:"code,omitempty"`
	Error     string        `json:"error,omitempty"`
	Count     int           `json:"count,omitempty"` // messages concerned (a batch, messages deferred)
	Late      time.Duration `json:"late,omitempty"`
	Since     time.Time     `json:"since,omitzero"` // a condition's start (rule sets differ, channel down)
	Nodes     []string      `json:"nodes,omitempty"`
}

// NewRaiseAlert builds the command that raises an alert for cause, with
// its facts and the English message that logs and the CLI show.
func NewRaiseAlert(c AlertCause, rule string, p AlertParams, msg string, now time.Time) RaiseAlert {
	return RaiseAlert{Cause: c.Key(), Kind: c.Kind, Params: &p, Rule: rule, Message: msg, Now: now}
}
