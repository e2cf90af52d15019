package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func unchangedAt(at time.Time, actor, action, target string) RecordAudit {
	r := auditAt(at, actor, action, target)
	r.Status, r.Unchanged = 200, true
	return r
}

// Issue 19: an operate token repeating an idempotent write 100,000 times
// (an acked alert acked again) pushed every earlier record past AuditCap.
// Folded, the earlier records stay, and the trail holds one more record,
// which counts the repeats. Before folding, the field did not exist (and a
// body carrying it stopped the node).
func TestUnchangedWritesDoNotFlushTheTrail(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	for i := range 10 {
		b.apply(CmdRecordAudit, auditAt(t0.Add(time.Duration(i)*time.Second), "ops", "task.submit", fmt.Sprint("k", i)))
	}
	const n = 100_000
	for i := range n {
		// Two targets, alternating: folding is by target, not only into
		// the newest record.
		b.apply(CmdRecordAudit, unchangedAt(t0.Add(time.Minute+time.Duration(i)*time.Millisecond), "flood", "alert.ack", fmt.Sprint("a", i%2)))
	}
	require.Equal(t, 12, b.fsm.AuditLen(), "ten records, and one for each target acked again")
	all := b.fsm.Audit(AuditQuery{Limit: 100})
	require.Equal(t, []uint64{12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, seqs(all.Records), "the earlier records are still there")
	require.Zero(t, all.Capped)
	require.Equal(t, AuditFold{Repeats: n/2 - 1, Last: t0.Add(time.Minute + (n-2)*time.Millisecond)}, all.Folds[11])
	require.Equal(t, AuditFold{Repeats: n/2 - 1, Last: t0.Add(time.Minute + (n-1)*time.Millisecond)}, all.Folds[12])

	// A write that changed something is stored, and a repeat of it after
	// folds into the same record as before.
	require.Equal(t, uint64(13), b.apply(CmdRecordAudit, auditAt(t0.Add(time.Hour), "flood", "alert.ack", "a0")))
	require.Equal(t, uint64(11), b.apply(CmdRecordAudit, unchangedAt(t0.Add(2*time.Hour), "flood", "alert.ack", "a0")))

	// The folds survive a snapshot, and the copy folds as the original.
	c := roundTrip(t, b.fsm)
	require.Equal(t, b.fsm.Audit(AuditQuery{Limit: 100}), c.Audit(AuditQuery{Limit: 100}))
	cb := &fsmBundle{t: t, fsm: c, term: 1, index: b.index}
	require.Equal(t, uint64(12), cb.apply(CmdRecordAudit, unchangedAt(t0.Add(3*time.Hour), "flood", "alert.ack", "a1")))
	require.Equal(t, 13, c.AuditLen())
}

// One actor naming ever new targets holds at most AuditUnchangedPerActor
// records; past that its unchanged writes fold into its newest one.
func TestUnchangedWritesOfOneActorAreBounded(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.apply(CmdRecordAudit, auditAt(t0, "ops", "task.submit", "first"))
	for i := range AuditUnchangedPerActor + 500 {
		b.apply(CmdRecordAudit, unchangedAt(t0.Add(time.Duration(i)*time.Millisecond), "flood", "task.submit", fmt.Sprint("k", i)))
	}
	require.Equal(t, 1+AuditUnchangedPerActor, b.fsm.AuditLen())
	newest := b.fsm.Audit(AuditQuery{Limit: 1})
	fo := newest.Folds[newest.Records[0].Seq]
	require.Equal(t, uint64(500), fo.Repeats)
	require.Equal(t, uint64(500), fo.Others)
	// Another actor is not held back by the first one's quota.
	require.Equal(t, uint64(AuditUnchangedPerActor+2), b.apply(CmdRecordAudit, unchangedAt(t0, "ci", "task.submit", "k0")))
}

// A pruned or capped record takes its folds with it; a repeat after that
// is stored again.
func TestPrunedUnchangedRecordIsStoredAgain(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.apply(CmdRecordAudit, unchangedAt(t0, "flood", "alert.ack", "a"))
	b.apply(CmdRecordAudit, unchangedAt(t0.Add(time.Minute), "flood", "alert.ack", "a"))
	require.Equal(t, 1, b.apply(CmdPruneAudit, PruneAudit{Before: t0.Add(time.Second), Now: t0.Add(time.Hour)}))
	require.Equal(t, uint64(2), b.apply(CmdRecordAudit, unchangedAt(t0.Add(2*time.Hour), "flood", "alert.ack", "a")))
	require.Empty(t, b.fsm.Audit(AuditQuery{Limit: 10}).Folds)
	require.Equal(t, uint16(2), snapshotFSM(b.fsm.st), "no fold: a version-3 member takes it")
	b.apply(CmdRecordAudit, unchangedAt(t0.Add(3*time.Hour), "flood", "alert.ack", "a"))
	require.Equal(t, FSMAuditFolds, snapshotFSM(b.fsm.st))
}

// A record of a write that changed something is written as body version 1
// while a member applies FSM version 3; one of an unchanged write waits.
func TestAdmitRecordAuditUnchanged(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.apply(CmdUpsertMember, Member{ID: "n1", FSMVersion: FSMVersion})
	b.apply(CmdUpsertMember, Member{ID: "n2", FSMVersion: 3})
	cmd, err := Encode(CmdRecordAudit, auditAt(t0, "ci", "task.submit", "k"))
	require.NoError(t, err)
	out, err := b.fsm.Admit(cmd)
	require.NoError(t, err)
	require.Equal(t, uint8(1), out[1])
	cmd, err = Encode(CmdRecordAudit, unchangedAt(t0, "ci", "task.submit", "k"))
	require.NoError(t, err)
	_, err = b.fsm.Admit(cmd)
	require.ErrorIs(t, err, ErrMembersBehind)
}
