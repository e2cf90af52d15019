package engine

import (
	"encoding/json"
	"time"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// CommandType is the first byte of every replicated command. The numbers
// are part of the log format: append only, never renumber, never reuse.
type CommandType uint8

// The commands; each body type says what it does. Every command number is
// declared here, in this one block, so that a number is never given twice:
// the numbers are in the replicated log forever (TestCommandNumbers pins
// each one). A new command takes a free number here and a row in
// commandSpecs below; its body and applier live in its feature's file.
const (
	CmdStartRun      CommandType = 1
	CmdAddDeliveries CommandType = 2
	CmdClaim         CommandType = 3
	CmdRecordResults CommandType = 4
	CmdUpsertMember  CommandType = 5
	CmdRemoveMember  CommandType = 6
	CmdInitCursor    CommandType = 7
	CmdFinishPlan    CommandType = 8
	CmdExpire        CommandType = 9
	CmdRaiseAlert    CommandType = 10
	CmdAckAlert      CommandType = 11
	CmdSubmitTask    CommandType = 12
	CmdCancelTask    CommandType = 13
	CmdNotifyAlert   CommandType = 14
	CmdCompensated   CommandType = 15
	CmdPrune         CommandType = 16

	// The audit trail (audit.go).
	CmdRecordAudit CommandType = 18
	CmdPruneAudit  CommandType = 19

	// Operators' commands (ops.go), all four since FSM version 2.
	CmdPauseRule       CommandType = 23
	CmdResumeRule      CommandType = 24
	CmdRetryDeliveries CommandType = 25
	CmdRefireRun       CommandType = 26

	// 33–40: issue 10 (people's local time, quiet hours, digests).
	CmdFoldDigest CommandType = 33

	// The directory (directory.go); 41–44 are the directory's numbers.
	CmdSetDirectory     CommandType = 41
	CmdHoldDirectory    CommandType = 42
	CmdConfirmDirectory CommandType = 43

	// Packed twins of the burst's commands (packed.go): the same bodies,
	// binary; 45–48 are the pipe's numbers (48 is free).
	CmdAddDeliveriesPacked CommandType = 45
	CmdClaimPacked         CommandType = 46
	CmdRecordResultsPacked CommandType = 47

	// 49–52: issue 18's clocks (clocks.go), since FSM version 3.
	CmdObserveClocks CommandType = 49

	// 61–80: FSM version 4. 61–63 removed members (cluster revocation),
	// 64–70 events and tasks that move, 71–76 card actions, recalls and
	// approvals; 77–80 spare.
	CmdRevokeMember  CommandType = 61 // removed.go
	CmdReadmitMember CommandType = 62

	// Events (event.go) and tasks that move (task_replace.go); 69–70 free.
	CmdRecordEvent   CommandType = 64
	CmdEventsHandled CommandType = 65
	CmdKfSynced      CommandType = 66
	CmdReplaceTask   CommandType = 67
	CmdPruneEvents   CommandType = 68

	// Recalls (recall.go) and approvals (approval.go); 75–76 card actions.
	CmdRecallDeliveries  CommandType = 71
	CmdRecordRecalls     CommandType = 72
	CmdHoldRun           CommandType = 73
	CmdDecideRun         CommandType = 74
	CmdClickCard         CommandType = 75 // card.go
	CmdRecordCardUpdates CommandType = 76

	// 81–100: FSM version 5: writes that arrive together in one entry,
	// audit records (audit.go) and task submissions (task.go).
	CmdRecordAudits CommandType = 81
	CmdSubmitTasks  CommandType = 82
)

// commandSpecs is the command table: the log format (name, body versions)
// and what applies each command. Append only: a new command gets a new
// type number; a changed body gets a new version (with an upgrade of the
// older bodies in code, see AddDeliveries.upgrade, and a downgrade when the
// leader may write the older one, see AddDeliveries.downgrade); nothing is
// renumbered or removed, because every later build replays logs written by
// every earlier one. Apply dispatches through it alone.
var commandSpecs = map[CommandType]commandSpec{
	CmdStartRun:      {name: "StartRun", since: []uint16{1, 4}, apply: applyJSON(applier.startRun), downgrade: downgradeJSON[StartRun]},
	CmdAddDeliveries: {name: "AddDeliveries", since: []uint16{1, 2}, apply: applyJSON(applier.addDeliveries), downgrade: downgradeJSON[AddDeliveries]},
	CmdClaim:         {name: "Claim", since: []uint16{1}, apply: applyJSON(applier.claim)},
	CmdRecordResults: {name: "RecordResults", since: []uint16{1}, apply: applyJSON(applier.recordResults)},
	CmdUpsertMember:  {name: "UpsertMember", since: []uint16{1}, apply: applyJSON(applier.upsertMember)},
	CmdRemoveMember:  {name: "RemoveMember", since: []uint16{1}, apply: applyJSON(applier.removeMember)},
	CmdInitCursor:    {name: "InitCursor", since: []uint16{1}, apply: applyJSON(applier.initCursor)},
	CmdFinishPlan:    {name: "FinishPlan", since: []uint16{1}, apply: applyJSON(applier.finishPlan)},
	CmdExpire:        {name: "Expire", since: []uint16{1}, apply: applyJSON(applier.expire)},
	CmdRaiseAlert:    {name: "RaiseAlert", since: []uint16{1, 2}, apply: applyJSON(applier.raiseAlert), downgrade: downgradeJSON[RaiseAlert]},
	CmdAckAlert:      {name: "AckAlert", since: []uint16{1}, apply: applyJSON(applier.ackAlert)},
	CmdSubmitTask:    {name: "SubmitTask", since: []uint16{1}, apply: applyJSON(applier.submitTask)},
	CmdCancelTask:    {name: "CancelTask", since: []uint16{1}, apply: applyJSON(applier.cancelTask)},
	CmdNotifyAlert:   {name: "NotifyAlert", since: []uint16{1}, apply: applyJSON(applier.notifyAlert)},
	CmdCompensated:   {name: "Compensated", since: []uint16{1}, apply: applyJSON(applier.compensated)},
	CmdPrune:         {name: "Prune", since: []uint16{1}, apply: applyJSON(applier.prune)},
	CmdFoldDigest:    {name: "FoldDigest", since: []uint16{2}, apply: applyJSON(applier.foldDigest)},

	CmdPauseRule:        {name: "PauseRule", since: []uint16{2, 4}, apply: applyJSON(applier.pauseRule), downgrade: downgradeJSON[PauseRule]},
	CmdResumeRule:       {name: "ResumeRule", since: []uint16{2}, apply: applyJSON(applier.resumeRule)},
	CmdRetryDeliveries:  {name: "RetryDeliveries", since: []uint16{2, 4}, apply: applyJSON(applier.retryDeliveries), downgrade: downgradeJSON[RetryDeliveries]},
	CmdRefireRun:        {name: "RefireRun", since: []uint16{2, 4}, apply: applyJSON(applier.refireRun), downgrade: downgradeJSON[RefireRun]},
	CmdSetDirectory:     {name: "SetDirectory", since: []uint16{2}, apply: applyJSON(applier.setDirectory)},
	CmdHoldDirectory:    {name: "HoldDirectory", since: []uint16{2}, apply: applyJSON(applier.holdDirectory)},
	CmdConfirmDirectory: {name: "ConfirmDirectory", since: []uint16{2, 4}, apply: applyJSON(applier.confirmDirectory), downgrade: downgradeJSON[ConfirmDirectory]},

	CmdRecordAudit: {name: "RecordAudit", since: []uint16{2, 4}, apply: applyJSON(applier.recordAudit), downgrade: downgradeJSON[RecordAudit]},
	CmdPruneAudit:  {name: "PruneAudit", since: []uint16{2}, apply: applyJSON(applier.pruneAudit)},

	CmdAddDeliveriesPacked: {name: "AddDeliveriesPacked", since: []uint16{2}, apply: applyPacked(unpackAddDeliveries, applier.addDeliveries)},
	CmdClaimPacked:         {name: "ClaimPacked", since: []uint16{2}, apply: applyPacked(UnpackClaim, applier.claim)},
	CmdRecordResultsPacked: {name: "RecordResultsPacked", since: []uint16{2}, apply: applyPacked(unpackRecordResults, applier.recordResults)},

	CmdObserveClocks: {name: "ObserveClocks", since: []uint16{3}, apply: applyJSON(applier.observeClocks)},

	CmdRecordEvent:       {name: "RecordEvent", since: []uint16{4}, apply: applyJSON(applier.recordEventCmd)},
	CmdEventsHandled:     {name: "EventsHandled", since: []uint16{4}, apply: applyJSON(applier.eventsHandled)},
	CmdKfSynced:          {name: "KfSynced", since: []uint16{4}, apply: applyJSON(applier.kfSynced)},
	CmdReplaceTask:       {name: "ReplaceTask", since: []uint16{4}, apply: applyJSON(applier.replaceTask)},
	CmdPruneEvents:       {name: "PruneEvents", since: []uint16{4}, apply: applyJSON(applier.pruneEvents)},
	CmdRevokeMember:      {name: "RevokeMember", since: []uint16{4}, apply: applyJSON(applier.revokeMember)},
	CmdReadmitMember:     {name: "ReadmitMember", since: []uint16{4}, apply: applyJSON(applier.readmitMember)},
	CmdRecallDeliveries:  {name: "RecallDeliveries", since: []uint16{4}, apply: applyJSON(applier.recallDeliveries)},
	CmdRecordRecalls:     {name: "RecordRecalls", since: []uint16{4}, apply: applyJSON(applier.recordRecalls)},
	CmdHoldRun:           {name: "HoldRun", since: []uint16{4}, apply: applyJSON(applier.holdRun)},
	CmdDecideRun:         {name: "DecideRun", since: []uint16{4}, apply: applyJSON(applier.decideRun)},
	CmdClickCard:         {name: "ClickCard", since: []uint16{4}, apply: applyJSON(applier.clickCard)},
	CmdRecordCardUpdates: {name: "RecordCardUpdates", since: []uint16{4}, apply: applyJSON(applier.recordCardUpdates)},

	CmdRecordAudits: {name: "RecordAudits", since: []uint16{5}, apply: applyJSON(applier.recordAudits)},
	CmdSubmitTasks:  {name: "SubmitTasks", since: []uint16{5}, apply: applyJSON(applier.submitTasks)},
}

// Member is a cluster member as the replicated state records it: Raft knows
// ids and Raft addresses; the HTTP address is what clients and forwarding
// need.
//
// FSMVersion and Build say which build the member last ran. They were added
// to body version 1 without a new version, deliberately: builds before FSM
// version 2 decode leniently and drop them, which loses nothing they use.
// Absent (0) means a build from before FSM versions, which applies FSM
// version 1.
type Member struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	HTTPAddr   string `json:"http_addr"`
	FSMVersion uint16 `json:"fsm_version,omitempty"`
	Build      string `json:"build,omitempty"`
}

// AppliesFSM is the FSM version the member's build applies.
func (m Member) AppliesFSM() uint16 { return max(m.FSMVersion, 1) }

// RemoveMember is the body of CmdRemoveMember.
type RemoveMember struct {
	ID string `json:"id"`
}

// upsertMember applies CmdUpsertMember: the member's record is replaced
// whole, so a restarted member's new build and addresses take effect.
func (a applier) upsertMember(m Member) any {
	a.st.Members[m.ID] = m
	return nil
}

// removeMember applies CmdRemoveMember; removing an unknown id changes
// nothing, so a repeated removal is harmless.
func (a applier) removeMember(c RemoveMember) any {
	delete(a.st.Members, c.ID)
	return nil
}

// StartRun claims a slot of a rule (or an API task) for a run. The state
// machine refuses a second run with the same key: a slot fires once, cluster
// wide, whatever happens to leaders.
type StartRun struct {
	Key       string          `json:"key"`
	Rule      string          `json:"rule"`
	Slot      time.Time       `json:"slot"`
	Zone      string          `json:"zone,omitempty"`
	TaskKey   string          `json:"task_key,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Late      bool            `json:"late,omitempty"`
	Skip      bool            `json:"skip,omitempty"`   // missed beyond catch-up: record, alert, send nothing
	Manual    bool            `json:"manual,omitempty"` // fired by hand: leaves the rule's cursor alone
	Date      string          `json:"date,omitempty"`   // the slot's date in the rule's zone (YYYY-MM-DD)
	RulesHash string          `json:"rules_hash,omitempty"`
	// Token (body version 2, FSM version 4) is the API token that fired
	// the run by hand, for a rule with an approval option only (its
	// approver must be another): approval.go.
	Token string    `json:"token,omitempty"`
	Now   time.Time `json:"now"`
}

// downgrade: a StartRun without a token says the same in version 1.
func (c *StartRun) downgrade(to uint8) bool { return to >= 2 || c.Token == "" }

// NewDelivery is one planned delivery inside AddDeliveries.
type NewDelivery struct {
	ID        string              `json:"id"`
	Recipient string              `json:"recipient"`
	Channel   string              `json:"channel"`
	Payload   json.RawMessage     `json:"payload"`
	Priority  heraldtype.Priority `json:"priority"`
	NotBefore time.Time           `json:"not_before"`
	Deadline  time.Time           `json:"deadline"`
	// Retry is the rule's waits between attempts: null means the default
	// (DefaultRetry), an empty list means "do not retry". Body version 1
	// had omitempty here, which wrote both as absent (so both meant the
	// default); version 2 always writes the field.
	Retry []time.Duration `json:"retry"`
}

// upgrade reads a version-1 body as the build that wrote it did: an empty
// retry list was never written, and absent meant the default.
func (c *AddDeliveries) upgrade(from uint8) {
	if from >= 2 {
		return
	}
	for i := range c.Deliveries {
		if len(c.Deliveries[i].Retry) == 0 {
			c.Deliveries[i].Retry = nil
		}
	}
}

// downgrade writes c for a cluster whose oldest member applies version 1
// bodies only: possible unless a delivery says "do not retry", which
// version 1 cannot express.
func (c *AddDeliveries) downgrade(to uint8) bool {
	if to >= 2 {
		return true
	}
	for _, d := range c.Deliveries {
		if d.Retry != nil && len(d.Retry) == 0 {
			return false
		}
	}
	return true
}

// AddDeliveries replicates a chunk of a run's plan. Ids already present are
// left as they are, so planning a run again is idempotent.
type AddDeliveries struct {
	RunKey     string        `json:"run_key"`
	Deliveries []NewDelivery `json:"deliveries"`
}

// FinishPlan marks a run fully planned, or failed with the rule's error.
type FinishPlan struct {
	RunKey string    `json:"run_key"`
	Error  string    `json:"error,omitempty"`
	Now    time.Time `json:"now"`
}

// ClaimDeliveries takes due deliveries for one attempt by Leader. A delivery is
// claimable when pending and due, or when claimed by an older term or past
// its claim's expiry (ambiguous: it is sent again with the same key).
type ClaimDeliveries struct {
	IDs     []string      `json:"ids"`
	Leader  string        `json:"leader"`
	Now     time.Time     `json:"now"`
	Timeout time.Duration `json:"timeout"`
}

// Claimed is the answer to ClaimDeliveries: what this leader may now send.
type Claimed struct {
	ID      string `json:"id"`
	Seq     int    `json:"seq"`
	Attempt int    `json:"attempt"`
}

// ClaimResult is what Apply returns for CmdClaim.
type ClaimResult struct {
	Claimed []Claimed
}

// Settlement settles one claim with the channel's verdict: the verdict
// (a heraldtype.Result) plus the claim it answers (Seq), as replicated in
// RecordResults. Build it with settle.
type Settlement struct {
	ID         string            `json:"id"`
	Seq        int               `json:"seq"`
	Status     heraldtype.Status `json:"status"`
	ProviderID string            `json:"provider_id,omitempty"`
	RetryAfter time.Duration     `json:"retry_after,omitempty"`
	Code       string            `json:"code,omitempty"`
	Error      string            `json:"error,omitempty"`
}

// RecordResults settles claims. A result applies only to the claim it
// answers (same Seq and Leader, still claimed): a late or duplicate result
// cannot overwrite a newer state.
type RecordResults struct {
	Leader  string       `json:"leader"`
	Now     time.Time    `json:"now"`
	Results []Settlement `json:"results"`
}

// Expire ends deliveries whose deadline has passed before they were sent.
type Expire struct {
	IDs []string  `json:"ids"`
	Now time.Time `json:"now"`
}

// InitCursor records the instant from which a rule's schedule counts, the
// first time any leader sees the rule. It does nothing if one is set.
type InitCursor struct {
	Rule string    `json:"rule"`
	At   time.Time `json:"at"`
}

// RaiseAlert raises (or repeats) an alert for a cause. Body version 2
// adds the cause's Kind and the occurrence's Params (build it with
// NewRaiseAlert); a version 1 body's kind is read from its cause key, and
// it has no params.
type RaiseAlert struct {
	Cause   string       `json:"cause"`
	Kind    AlertKind    `json:"kind,omitempty"`
	Params  *AlertParams `json:"params,omitempty"`
	Rule    string       `json:"rule,omitempty"`
	Message string       `json:"message"`
	Now     time.Time    `json:"now"`
}

func (c *RaiseAlert) upgrade(from uint8) {
	if from < 2 || c.Kind == "" {
		c.Kind = ParseAlertCause(c.Cause).Kind
	}
}

// downgrade writes c for a cluster whose oldest member applies version 1
// bodies: always possible, as version 1 builds ignore the kind and
// params (and a newer build reading it as version 1 derives the same
// kind from the cause); the alert's text there is its message.
func (c *RaiseAlert) downgrade(uint8) bool { return true }

// AckAlert acknowledges an alert.
type AckAlert struct {
	ID string `json:"id"`
}
