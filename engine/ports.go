package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// This file holds the small interfaces through which the engine reaches the
// rest of Herald. The engine imports neither Raft, Lua nor go-plugin: the
// cluster, rules and plugins packages implement these and cmd/herald wires
// them together.

// Replicator proposes commands to the replicated log. It is implemented by
// the cluster package.
type Replicator interface {
	// Apply replicates cmd (built with Encode) and returns what the state
	// machine's Apply returned for it. It fails with ErrNotLeader on a
	// follower.
	Apply(ctx context.Context, cmd []byte) (any, error)
	// VerifyLeader confirms with a quorum that this node still leads. The
	// executor calls it after a claim commits and before the send.
	VerifyLeader(ctx context.Context) error
}

// RuleSource is the engine's view of the loaded rule set. It is implemented
// by the rules package and must be safe for concurrent use.
type RuleSource interface {
	// Rules returns the current good version of every rule.
	Rules() []Rule
	// Hash identifies the whole current rule set (recorded with every run).
	Hash() string
	// Plan evaluates a rule for one run: who receives and what each gets.
	Plan(ctx context.Context, rule string, run RunContext) ([]Planned, error)
	// OnFailed runs a rule's on_failed hook after a delivery finally fails.
	// A rule without the hook returns nil. submit is how the hook may
	// schedule an API task (task.submit); the leader stamps its Now.
	OnFailed(ctx context.Context, rule string, run RunContext, failed FailedDelivery, submit SubmitFunc) error
}

// SubmitFunc schedules an API task: what the leader hands a rule's
// on_failed (RuleSource.OnFailed) so that it can schedule a follow-up. The
// leader stamps Now.
type SubmitFunc func(ctx context.Context, t SubmitTask) (*Task, error)

// Rule is what the engine needs to know of one rule file.
type Rule struct {
	Name     string
	File     string
	Hash     string
	Schedule string // cron spec; empty for rules triggered by API tasks
	Timezone string // IANA zone name; empty means UTC
	Calendar string // "", "cn_workday", "weekday" or a named calendar file
	Shift    string // "", "skip" or "next_workday"
	Channel  string
	Priority heraldtype.Priority
	Stagger  Stagger
	Retry    []time.Duration // waits between attempts; nil means DefaultRetry
	Deadline time.Duration   // 0 means DefaultDeadline
	Catchup  time.Duration   // 0 means DefaultCatchup

	// PerRecipient (timezone = "recipient"): the schedule fires in each
	// recipient's own zone, one run per zone of Zones and local slot;
	// Timezone is then the zone of people who name none.
	PerRecipient bool
	// Zones are the zones a PerRecipient rule fires in: every zone a
	// recipient may be in, sorted. The rule source computes them from its
	// people directory.
	Zones []string
	// QuietStrict: quiet hours hold high priority messages too.
	QuietStrict bool
	// Events are the event types the rule's on_event takes (events =
	// {…}); none: the rule takes no events.
	Events []string
	// Digest folds the rule's deliveries to one person whose send times
	// fall in one window of this length into one message; 0: no digest.
	Digest time.Duration
	// ApprovalOver (approval = { over = N }): a run planned for more than
	// this many people waits for a person's approval (approval.go); 0:
	// never.
	ApprovalOver int
}

// FireZones are the zones rule r's schedule fires in: each of Zones for
// a per-recipient rule that names them, else its one Timezone.
func (r Rule) FireZones() []string {
	if r.PerRecipient && len(r.Zones) > 0 {
		return r.Zones
	}
	return []string{r.Timezone}
}

// RunContext is what a rule's functions see as `run` (and `to.missed`).
type RunContext struct {
	Rule string
	Key  string
	Slot time.Time // in the rule's zone
	Zone string
	Data json.RawMessage // an API task's data; nil for scheduled runs
	// DirectoryHash names the directory snapshot the run was started
	// with; the rule source plans with exactly that one (or answers
	// ErrDirectoryPending while it is still catching up).
	DirectoryHash string
	// Missed maps a userid to that person's earlier slots of this rule
	// (RFC 3339) whose delivery finally failed and was not yet made good.
	Missed map[string][]string
}

// ErrDirectoryPending is what a RuleSource answers when a run names a
// directory snapshot it does not have in force yet (it is being applied on
// this node): the planner tries again shortly.
var ErrDirectoryPending = errors.New("the run's directory snapshot is not in force on this node yet")

// Planned is one recipient's message as a rule decided it.
type Planned struct {
	Recipient string          // userid (or robot/chat id for group channels)
	Payload   json.RawMessage // the channel's message body
	// Zone is the recipient's own zone, in which Quiet is read; "" means
	// the run's zone.
	Zone string
	// Quiet is the recipient's quiet window for this rule (their own, else
	// the rule's); the zero value is none.
	Quiet QuietHours
}

// FailedDelivery describes a delivery that ended failed or expired, as the
// rule's on_failed hook sees it.
type FailedDelivery struct {
	ID        string
	Recipient string
	State     DeliveryState
	Attempts  int
	Error     string
}

// Sender delivers batches through channel plugins. It is implemented by the
// plugins host and must be safe for concurrent use.
type Sender interface {
	// Admit reserves rate-limit capacity for one message of priority p to
	// recipient on channel at now. It returns 0 when the message may go now,
	// else how long to wait before asking again (nothing is reserved then).
	Admit(channel, recipient string, p heraldtype.Priority, now time.Time) time.Duration
	// Send delivers a batch through channel. It returns one verdict per
	// message, in any order, matched by ID. An error means the whole batch
	// failed in a way that is worth retrying (plugin crashed, unreachable).
	Send(ctx context.Context, channel string, batch []heraldtype.Message) ([]heraldtype.Result, error)
}

// Recaller takes back messages a channel sent (WeCom's message/recall). The
// plugins host implements it beside Sender; the leader recalls only
// through a Sender that does, and answers every recall "not recallable"
// otherwise.
type Recaller interface {
	// Recall returns one verdict per message, matched by ID. An error
	// means the whole batch failed and is worth asking again.
	Recall(ctx context.Context, channel string, batch []heraldtype.RecallMessage) ([]heraldtype.RecallResult, error)
}

// CardUpdater is a Sender that can replace interactive cards after a click
// (WeCom's update_template_card): engine/card.go.
type CardUpdater interface {
	// UpdateCards returns one verdict per update, matched by ID (StatusSent:
	// replaced). An error means the whole batch failed.
	UpdateCards(ctx context.Context, channel string, batch []heraldtype.CardUpdate) ([]heraldtype.Result, error)
}

// Snapshot is an immutable view of the replicated state taken by
// FSM.Snapshot; Persist writes it out (off the apply path).
type Snapshot interface {
	Persist(w io.Writer) error
	Release()
}

// Schedule yields the slots of a rule's trigger.
type Schedule interface {
	// Next returns the first slot strictly after after, or false if none.
	Next(after time.Time) (time.Time, bool)
}

// Defaults for rule fields left empty.
const (
	DefaultDeadline = 2 * time.Hour
	DefaultCatchup  = time.Hour
)

// DefaultRetry is the wait before each retry when a rule names none.
var DefaultRetry = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute}

// ErrNotLeader is returned by a Replicator on a node that does not lead.
var ErrNotLeader = errors.New("not the leader")

// Stagger spreads a run's deliveries so that 1,000 reports do not leave at
// 9:00:00 sharp. Either Jitter, or Batches with Spacing; zero value: none.
type Stagger struct {
	Jitter  time.Duration
	Batches int
	Spacing time.Duration
}
