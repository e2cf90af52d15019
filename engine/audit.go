package engine

import (
	"errors"
	"time"
)

// The audit trail: who changed what through the API. Records are
// replicated like everything else, so every node answers GET /v1/audit the
// same, and a leader's crash loses none that were committed. The API
// proposes a record after each write it accepted (engine/api audit.go
// says why it is a command of its own, not part of the write's): the
// records of writes answered together go in one RecordAudits, or one
// RecordAudit each while a member applies FSM version 4. The commands are
// CmdRecordAudit, CmdRecordAudits and CmdPruneAudit (command.go).

// Defaults of the audit trail.
const (
	// AuditRetentionDefault is how long records are kept (config
	// audit_retention).
	AuditRetentionDefault = 90 * 24 * time.Hour
	// AuditCap bounds the records kept, whatever their age: a flood of
	// writes (a script in a loop, a compromised operate token) costs at
	// most this many records, and the oldest go first. Measured: 28 MB of
	// heap for 100,000 records with 48-byte targets; the API clips a
	// target to 256 bytes, so at most about 60 MB. It is a constant because every node must drop
	// the same records; AuditState.Capped counts what it dropped.
	AuditCap = 100_000
)

// AuditRecord is one accepted write, as stored: the RecordAudit that
// made it, numbered. Records are never changed once stored.
type AuditRecord struct {
	// Seq numbers the records of the cluster in the order they were
	// committed, from 1; GET /v1/audit pages by it.
	Seq uint64 `json:"seq"`
	RecordAudit
}

// RecordAudit stores one record (Apply numbers it). Every field is
// written, empty or not: an empty Via (not forwarded) or Target (no
// target) is a value, not an absence.
type RecordAudit struct {
	// At is when the write was answered, stamped by the leader that
	// performed it.
	At time.Time `json:"at"`
	// Actor is the API token's name, "loopback" (no tokens, a write from
	// the node's own machine) or "peer" (a join proven by the cluster
	// secret). Never a secret. Role is the role it was granted.
	Actor string `json:"actor"`
	Role  string `json:"role"`
	// Remote is the client's address as the node it connected to saw it.
	// Via is the node that forwarded the write to the leader (and vouched
	// for Remote), "" when the client reached the leader itself.
	Remote string `json:"remote"`
	Via    string `json:"via"`
	// Action names the write ("task.submit", "rule.pause",
	// "cluster.remove"), Target what it acted on (a task key, a rule, a
	// member id; "" when nothing in particular).
	Action string `json:"action"`
	Target string `json:"target"`
	// Status is the HTTP status the write was answered with.
	Status int `json:"status"`
	// Node is the member that performed the write and recorded it.
	Node string `json:"node"`
	// Unchanged marks a write that changed nothing (an acked alert acked
	// again, a task submitted again as it is): Apply folds it into the
	// record of the same actor, action and target (audit_fold.go) rather
	// than storing it again. Body version 2 (FSM version 4); false, and
	// left out, is what a version-1 body means.
	Unchanged bool `json:"unchanged,omitempty"`
}

// downgrade: a record of a write that changed something is the same in
// both body versions.
func (c *RecordAudit) downgrade(to uint8) bool { return to >= 2 || !c.Unchanged }

// RecordAudits stores records in their order, as that many RecordAudit
// would (FSM version 5): one entry for the writes a busy leader answered
// together, instead of one each, which was half the entries of a stream
// of task submissions.
type RecordAudits struct {
	Records []RecordAudit `json:"records"`
}

// PruneAudit drops the records older than Before (the leader's now minus
// the audit retention).
type PruneAudit struct {
	Before time.Time `json:"before"`
	Now    time.Time `json:"now"`
}

// auditState is the trail in the replicated state.
type auditState struct {
	// Records in Seq order, oldest first. Only ever re-sliced or appended
	// to, never written in place, so a snapshot's copy of the slice header
	// stays valid while Apply goes on.
	Records []*AuditRecord
	// Seq is the last number given: it outlives pruned records, so a
	// number is never given twice.
	Seq uint64
	// Capped counts the records dropped by AuditCap rather than by age.
	Capped uint64
	// Folds holds, by Seq, what was folded into a record of an unchanged
	// write (audit_fold.go); only records still in Records have one.
	// Written in place: clone copies it.
	Folds map[uint64]AuditFold

	// Derived from Records (rebuilt on restore and prune, never
	// snapshotted): the record each fold key folds into, and per actor
	// how many unchanged records it has in the trail and its newest.
	unchanged   map[string]uint64
	actorCount  map[string]int
	actorNewest map[string]uint64
}

func (a applier) recordAudit(c RecordAudit) any {
	if c.Action == "" || c.Actor == "" {
		return errors.New("record audit: action and actor are required")
	}
	au := &a.st.Audit
	if c.Unchanged {
		if seq, ok := au.fold(c); ok {
			return seq
		}
	}
	au.Seq++
	r := &AuditRecord{Seq: au.Seq, RecordAudit: c}
	if len(au.Records) >= AuditCap {
		drop := len(au.Records) - AuditCap + 1
		for _, old := range au.Records[:drop] {
			au.forget(old)
		}
		au.Records = au.Records[drop:]
		au.Capped += uint64(drop)
	}
	au.Records = append(au.Records, r)
	if c.Unchanged {
		au.remember(r)
	}
	return r.Seq
}

// recordAudits answers, per record and in order, what recordAudit would:
// its Seq, or the error that refused it (a refused record does not stop
// the others).
func (a applier) recordAudits(c RecordAudits) any {
	out := make([]any, len(c.Records))
	for i, r := range c.Records {
		out[i] = a.recordAudit(r)
	}
	return out
}

func (a applier) pruneAudit(c PruneAudit) any {
	if err := a.horizonAhead(CmdPruneAudit, c.Now, c.Before); err != nil {
		return err
	}
	au := &a.st.Audit
	kept := make([]*AuditRecord, 0, len(au.Records))
	for _, r := range au.Records {
		if !r.At.Before(c.Before) {
			kept = append(kept, r)
		}
	}
	n := len(au.Records) - len(kept)
	if n > 0 {
		// A new slice: snapshots taken before still read the old one.
		au.Records = kept
		au.reindex()
	}
	return n
}

// AuditQuery selects audit records, newest first.
type AuditQuery struct {
	// Before: only records with a smaller Seq (a page's cursor); 0 means
	// from the newest.
	Before uint64
	// Limit is the most records returned (at least 1).
	Limit int
	// Actor and Action, when set, must match exactly; Since, when set,
	// keeps records at or after it.
	Actor, Action string
	Since         time.Time
}

// AuditPage is an answer to AuditQuery.
type AuditPage struct {
	Records []*AuditRecord
	// Next is the Before of the next page; 0 when this page is the last.
	Next uint64
	// Capped counts the records ever dropped by AuditCap.
	Capped uint64
	// Folds holds what was folded into the page's records, by Seq.
	Folds map[uint64]AuditFold
}

// Audit answers q from the trail.
func (f *FSM) Audit(q AuditQuery) AuditPage {
	f.mu.RLock()
	defer f.mu.RUnlock()
	limit := max(q.Limit, 1)
	recs := f.st.Audit.Records
	page := AuditPage{Records: []*AuditRecord{}, Capped: f.st.Audit.Capped}
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if q.Before != 0 && r.Seq >= q.Before {
			continue
		}
		if (q.Actor != "" && r.Actor != q.Actor) || (q.Action != "" && r.Action != q.Action) ||
			(!q.Since.IsZero() && r.At.Before(q.Since)) {
			continue
		}
		if len(page.Records) == limit {
			page.Next = page.Records[limit-1].Seq
			break
		}
		page.Records = append(page.Records, r)
		if fo, ok := f.st.Audit.Folds[r.Seq]; ok {
			if page.Folds == nil {
				page.Folds = map[uint64]AuditFold{}
			}
			page.Folds[r.Seq] = fo
		}
	}
	return page
}

// AuditLen is how many audit records the state holds.
func (f *FSM) AuditLen() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.st.Audit.Records)
}
