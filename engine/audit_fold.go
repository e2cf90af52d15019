package engine

import (
	"maps"
	"time"
)

// Folding unchanged writes. An idempotent write (an acked alert acked
// again, a task submitted again as it is, a retry that found nothing to
// retry) is answered 200, and recorded; stored once per repeat, a token
// in a loop would push every earlier record past AuditCap and so flush
// the trail. A RecordAudit marked Unchanged is therefore folded, in Apply
// and so the same on every member:
//
//   - into the record of the same actor, action and target, when that
//     record is still in the trail (whatever came between: alternating
//     two targets folds as well as repeating one);
//   - else, once the actor has AuditUnchangedPerActor unchanged records in
//     the trail, into that actor's newest one (counted in Others: the
//     target differed), so no actor's unchanged writes hold more than
//     that many records, whatever targets it names.
//
// A folded write keeps no record of its own: the record it folded into
// counts it (AuditFold.Repeats) and keeps the last one's time. A write
// that changed something is always stored, folded into nothing.

// AuditUnchangedPerActor bounds the records an actor's unchanged writes
// hold in the trail (past it they fold into its newest). A constant,
// because every member must fold the same.
const AuditUnchangedPerActor = 1000

// AuditFold is what was folded into one record.
type AuditFold struct {
	// Repeats counts the unchanged writes folded into the record.
	Repeats uint64 `json:"repeats"`
	// Others counts those of Repeats that named another target (folded
	// because the actor had used up AuditUnchangedPerActor).
	Others uint64 `json:"others"`
	// Last is the At of the newest write folded.
	Last time.Time `json:"last"`
}

// auditFoldEntry is one fold in a snapshot ("audit_folds", written only
// when there is a fold, which only a version-4 cluster makes).
type auditFoldEntry struct {
	Seq uint64
	AuditFold
}

func foldKey(c RecordAudit) string {
	return c.Actor + "\x00" + c.Action + "\x00" + c.Target
}

// fold folds c into a record if it may, and returns that record's Seq.
func (au *auditState) fold(c RecordAudit) (uint64, bool) {
	au.ensure()
	seq, ok := au.unchanged[foldKey(c)]
	other := false
	if !ok && au.actorCount[c.Actor] >= AuditUnchangedPerActor {
		seq, ok, other = au.actorNewest[c.Actor], true, true
	}
	if !ok {
		return 0, false
	}
	fo := au.Folds[seq]
	fo.Repeats++
	if other {
		fo.Others++
	}
	if c.At.After(fo.Last) {
		fo.Last = c.At
	}
	au.Folds[seq] = fo
	return seq, true
}

// remember indexes r, a record of an unchanged write just appended.
func (au *auditState) remember(r *AuditRecord) {
	au.ensure()
	au.unchanged[foldKey(r.RecordAudit)] = r.Seq
	au.actorCount[r.Actor]++
	au.actorNewest[r.Actor] = r.Seq
}

// forget drops what the indexes and Folds hold of r, a record leaving the
// trail from its old end.
func (au *auditState) forget(r *AuditRecord) {
	if !r.Unchanged {
		return
	}
	au.ensure()
	delete(au.Folds, r.Seq)
	k := foldKey(r.RecordAudit)
	if au.unchanged[k] == r.Seq {
		delete(au.unchanged, k)
	}
	if au.actorCount[r.Actor]--; au.actorCount[r.Actor] <= 0 {
		delete(au.actorCount, r.Actor)
		delete(au.actorNewest, r.Actor)
	}
}

func (au *auditState) ensure() {
	if au.unchanged == nil {
		au.unchanged, au.actorCount, au.actorNewest = map[string]uint64{}, map[string]int{}, map[string]uint64{}
	}
	if au.Folds == nil {
		au.Folds = map[uint64]AuditFold{}
	}
}

// reindex rebuilds the derived indexes from Records, and drops the folds
// of records no longer there (after a restore or a prune).
func (au *auditState) reindex() {
	au.unchanged, au.actorCount, au.actorNewest = nil, nil, nil
	folds := au.Folds
	au.Folds = nil
	au.ensure()
	for _, r := range au.Records {
		if !r.Unchanged {
			continue
		}
		au.remember(r)
		if fo, ok := folds[r.Seq]; ok {
			au.Folds[r.Seq] = fo
		}
	}
}

// clone is the copy a snapshot reads while Apply goes on: Records is only
// appended to or re-sliced, Folds is written in place.
func (au auditState) clone() auditState {
	out := auditState{Records: au.Records, Seq: au.Seq, Capped: au.Capped}
	if len(au.Folds) > 0 {
		out.Folds = maps.Clone(au.Folds)
	}
	return out
}
