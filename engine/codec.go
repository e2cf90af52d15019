package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// This file holds the log format: how a command is framed, which body
// versions each build reads, and what a build does with a command it cannot
// read. Rolling upgrades depend on it; see "The replicated log" in
// engine/DESIGN.md.

// FSMVersion is the version of the replicated log this build applies: every
// command type and body version registered in commandSpecs with Since up to
// it. It grows by one for each release that adds a command or a body
// version, or a snapshot section an older build would refuse, never
// otherwise.
//
//   - 1: the sixteen commands of the first builds (no table, no flag bit).
//   - 2: the command table, the ignorable flag, AddDeliveries body version 2
//     (an empty retry list means "do not retry"), member FSM versions, and
//     every command added with them.
//   - 3: ObserveClocks (clocks.go) and the horizon guard it arms on
//     Prune, PruneAudit and Expire. Admit refuses ObserveClocks while a
//     member applies version 2 (it has no older body), so no observation
//     is in the log, and the guard stays unarmed, until every member
//     reads it.
//   - 4: the commands of issues 19–21 (removed members, events, tasks that
//     move, card actions, recalls, approvals): command.go's block for 61–80.
//     Admit holds each of them while a member applies version 3. Also
//     RecordAudit's body version 2 (unchanged: folded, audit_fold.go);
//     Admit writes it as version 1 unless it is set.
//   - 5: RecordAudits and SubmitTasks, the audit records and the task
//     submissions that arrive together in one entry (81–100 in
//     command.go). Admit holds them while a member applies version 4, and
//     the API then proposes one an entry, as before.
//   - 6: no new command: the snapshot section tasks_packed
//     (snapshot_tasks.go), which a snapshot holds only once every member
//     applies 6.
//   - 7: no new command: a snapshot's header may name the members a
//     restore installs (FSMSnapshotMembers: a backup restored reads once
//     on the leader, its body passed through as it came); a build on 6
//     would keep the body's members, so it refuses the snapshot.
const FSMVersion uint16 = 7

// FSMVersion4 is FSM version 4 by name, for what it added that the API
// leaves out while a member applies 3 (the operators' notes).
const FSMVersion4 uint16 = 4

// FSMAuditFolds is the FSM version that first folded unchanged writes
// into the audit trail (the snapshot section audit_folds).
const FSMAuditFolds uint16 = 4

// FSMGroupedWrites is the FSM version that first applied RecordAudits and
// SubmitTasks: the API groups audit records and task submissions once
// every member applies it.
const FSMGroupedWrites uint16 = 5

// FSMClocks is the FSM version that first applied ObserveClocks: the
// leader observes clocks once every member applies it.
const FSMClocks uint16 = 3

// CmdIgnorable is the bit of a command's type byte that tells a build that
// does not know the type that it may skip the command. It is for commands whose loss
// on an older node changes nothing that node decides (informational
// records); every other unknown command stops the node.
const CmdIgnorable CommandType = 0x80

// Build names the build of this binary in member records and messages
// ("devel" unless cmd/herald sets it from the binary's build info).
var Build = "devel"

// commandSpec is what a build knows of one command type: one row of
// commandSpecs (command.go).
type commandSpec struct {
	name string
	// since[v-1] is the FSM version that first applied body version v; the
	// last entry is the version Encode writes.
	since []uint16
	// apply decodes the body and applies it (applyJSON, applyPacked).
	apply func(applier, decoder) any
	// downgrade decodes a body for Admit's check that it can be written as
	// an older body version; nil for types whose versions are all written
	// the same way (or that have one version).
	downgrade func([]byte) (downgrader, error)
}

func (s commandSpec) latest() uint8 { return uint8(len(s.since)) }

// applyJSON makes the applier of a command with a JSON body: decode it
// strictly (stopping the node if it does not decode), then apply it.
func applyJSON[T any](apply func(applier, T) any) func(applier, decoder) any {
	return func(a applier, d decoder) any { return apply(a, decode[T](d)) }
}

// applyPacked makes the applier of a packed command (packed.go): unpack the
// body, then apply it with its JSON twin's applier.
func applyPacked[T any](unpackBody func([]byte) (T, error), apply func(applier, T) any) func(applier, decoder) any {
	return func(a applier, d decoder) any { return apply(a, unpack(d, unpackBody)) }
}

func (t CommandType) String() string {
	if s, ok := commandSpecs[t&^CmdIgnorable]; ok {
		return s.name
	}
	return fmt.Sprintf("command(%d)", uint8(t&^CmdIgnorable))
}

// Encode builds a replicated command: type byte, the newest body version,
// JSON body.
func Encode(t CommandType, body any) ([]byte, error) {
	spec, ok := commandSpecs[t&^CmdIgnorable]
	if !ok {
		return nil, fmt.Errorf("encode %s: not in the command table", t)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	out := make([]byte, 0, len(b)+2)
	out = append(out, byte(t), spec.latest())
	return append(out, b...), nil
}

// upgrader is a body that reads older versions differently from the newest.
type upgrader interface{ upgrade(from uint8) }

// downgrader is a body that can be written as an older version when the
// cluster's oldest member cannot read the newest; false when this body
// cannot be said in that version.
type downgrader interface{ downgrade(to uint8) bool }

// downgradeJSON decodes a JSON body of type T for its downgrade check.
func downgradeJSON[T any, P interface {
	*T
	downgrader
}](b []byte) (downgrader, error) {
	var c T
	return P(&c), json.Unmarshal(b, &c)
}

// decodeBody decodes a body strictly: a field this build does not know
// would be lost, so it is an error, as is trailing data. Older body
// versions are upgraded to the newest.
func decodeBody[T any](v uint8, body []byte) (T, error) {
	var out T
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return out, err
	}
	if dec.More() {
		return out, errors.New("data after the body")
	}
	if u, ok := any(&out).(upgrader); ok {
		u.upgrade(v)
	}
	return out, nil
}

// ErrUnreadableCommand is what a node stops on: a committed command it
// cannot apply. Matched with errors.Is by *UnreadableCommandError.
var ErrUnreadableCommand = errors.New("unreadable command")

// UnreadableCommandError says which log entry stopped the node and what
// would read it.
type UnreadableCommandError struct {
	Index   uint64
	Type    CommandType
	Version uint8
	Reason  string
	// Newest is the highest FSM version a member of the cluster recorded
	// (with that member's id and build): a build that can read the entry,
	// when the entry was written by a newer one.
	Newest      uint16
	NewestBuild string
}

func (e *UnreadableCommandError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "herald: cannot apply log entry %d (%s, body version %d): %s; this node's build %s applies FSM version %d",
		e.Index, e.Type, e.Version, e.Reason, Build, FSMVersion)
	if e.Newest > FSMVersion {
		fmt.Fprintf(&b, "; upgrade this node to a build that applies FSM version %d or later (member %s) and start it again", e.Newest, e.NewestBuild)
	} else {
		b.WriteString("; upgrade this node to the build the other members run and start it again")
	}
	return b.String()
}

// Is makes errors.Is(err, ErrUnreadableCommand) true.
func (e *UnreadableCommandError) Is(target error) bool { return target == ErrUnreadableCommand }

// ErrMembersBehind is the leader's answer to a write whose command some
// member's build cannot apply yet (a rolling upgrade under way): it is not
// proposed, so that member does not stop. Matched by *MembersBehindError.
var ErrMembersBehind = errors.New("members run an older build")

// MembersBehindError names the command and the members it waits for.
type MembersBehindError struct {
	Command CommandType
	Need    uint16
	Behind  []string // "n2 (FSM version 1)"
}

func (e *MembersBehindError) Error() string {
	return fmt.Sprintf("%s needs FSM version %d on every member; waiting for %s to be upgraded",
		e.Command, e.Need, strings.Join(e.Behind, ", "))
}

// Is makes errors.Is(err, ErrMembersBehind) true.
func (e *MembersBehindError) Is(target error) bool { return target == ErrMembersBehind }

// Admit checks cmd against the oldest FSM version among the members before
// the leader proposes it. It returns cmd (rewritten as an older body
// version where the body allows it) or a *MembersBehindError: a command
// is never proposed that a member could not apply.
func (f *FSM) Admit(cmd []byte) ([]byte, error) {
	if len(cmd) < 2 {
		return nil, fmt.Errorf("command of %d bytes is too short", len(cmd))
	}
	t, v := CommandType(cmd[0]), cmd[1]
	spec, ok := commandSpecs[t&^CmdIgnorable]
	if !ok || v < 1 || v > spec.latest() {
		return nil, fmt.Errorf("%s body version %d is not in this build's command table", t, v)
	}
	f.mu.RLock()
	oldest, behind := FSMVersion, map[uint16][]string{}
	for _, id := range slices.Sorted(maps.Keys(f.st.Members)) {
		m := f.st.Members[id]
		oldest = min(oldest, m.AppliesFSM())
		behind[m.AppliesFSM()] = append(behind[m.AppliesFSM()], fmt.Sprintf("%s (FSM version %d)", id, m.AppliesFSM()))
	}
	f.mu.RUnlock()
	if spec.since[v-1] <= oldest {
		return cmd, nil
	}
	// The newest version the oldest member reads, if the type existed then.
	if spec.since[0] <= oldest {
		to := uint8(1)
		for to < v && spec.since[to] <= oldest {
			to++
		}
		if spec.downgrade != nil {
			body, err := spec.downgrade(cmd[2:])
			if err == nil && body.downgrade(to) {
				out := slices.Clone(cmd)
				out[1] = to
				return out, nil
			}
		}
	}
	var names []string
	for fv, ids := range behind {
		if fv < spec.since[v-1] {
			names = append(names, ids...)
		}
	}
	slices.Sort(names)
	return nil, &MembersBehindError{Command: t, Need: spec.since[v-1], Behind: names}
}

// OldestMemberFSM is the lowest FSM version among the members' builds
// (FSMVersion when there are no member records yet).
func (f *FSM) OldestMemberFSM() uint16 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	oldest := FSMVersion
	for _, m := range f.st.Members {
		oldest = min(oldest, m.AppliesFSM())
	}
	return oldest
}
