package engine

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func auditAt(at time.Time, actor, action, target string) RecordAudit {
	return RecordAudit{At: at, Actor: actor, Role: "operate", Remote: "192.0.2.7", Via: "", Action: action, Target: target, Status: 201, Node: "n1"}
}

func TestRecordAuditAndQuery(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	for i := range 5 {
		actor := "ci"
		if i%2 == 1 {
			actor = "ops"
		}
		require.Equal(t, uint64(i+1), b.apply(CmdRecordAudit, auditAt(t0.Add(time.Duration(i)*time.Minute), actor, "task.submit", fmt.Sprint("k", i))))
	}
	require.Error(t, b.apply(CmdRecordAudit, RecordAudit{At: t0, Actor: "ci"}).(error), "an action is required")

	page := b.fsm.Audit(AuditQuery{Limit: 2})
	require.Equal(t, []uint64{5, 4}, seqs(page.Records), "newest first")
	require.Equal(t, uint64(4), page.Next)
	page = b.fsm.Audit(AuditQuery{Limit: 2, Before: page.Next})
	require.Equal(t, []uint64{3, 2}, seqs(page.Records))
	page = b.fsm.Audit(AuditQuery{Limit: 2, Before: page.Next})
	require.Equal(t, []uint64{1}, seqs(page.Records))
	require.Zero(t, page.Next, "the last page")

	require.Equal(t, []uint64{4, 2}, seqs(b.fsm.Audit(AuditQuery{Limit: 10, Actor: "ops"}).Records))
	require.Equal(t, []uint64{5, 4, 3}, seqs(b.fsm.Audit(AuditQuery{Limit: 10, Since: t0.Add(2 * time.Minute)}).Records))
	require.Empty(t, b.fsm.Audit(AuditQuery{Limit: 10, Action: "rule.pause"}).Records)

	r := b.fsm.Audit(AuditQuery{Limit: 1}).Records[0]
	require.Equal(t, AuditRecord{Seq: 5, RecordAudit: RecordAudit{At: t0.Add(4 * time.Minute), Actor: "ci", Role: "operate", Remote: "192.0.2.7",
		Action: "task.submit", Target: "k4", Status: 201, Node: "n1"}}, *r)
}

func seqs(rs []*AuditRecord) []uint64 {
	out := []uint64{}
	for _, r := range rs {
		out = append(out, r.Seq)
	}
	return out
}

// A body with a field this build does not know stops the node rather than
// dropping the field; and every field is written, so an empty via (not
// forwarded) is a value on the wire, not an absence.
func TestRecordAuditBodyIsStrict(t *testing.T) {
	t.Parallel()
	cmd, err := Encode(CmdRecordAudit, auditAt(t0, "ci", "task.submit", "k"))
	require.NoError(t, err)
	require.Contains(t, string(cmd), `"via":""`, "an empty via is written, not left out")
	require.Contains(t, string(cmd), `"target":"k"`)
	bad := append(cmd[:len(cmd)-1:len(cmd)-1], []byte(`,"token":"x"}`)...)
	err = stopOf(t, NewFSM(), 1, bad)
	require.ErrorIs(t, err, ErrUnreadableCommand)
	require.Contains(t, err.Error(), `unknown field "token"`)
	require.Equal(t, "RecordAudit", CmdRecordAudit.String())
	require.Equal(t, "PruneAudit", CmdPruneAudit.String())
}

func TestPruneAudit(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	for i := range 4 {
		b.apply(CmdRecordAudit, auditAt(t0.Add(time.Duration(i)*24*time.Hour), "ci", "task.cancel", "k"))
	}
	before, err := b.fsm.Snapshot()
	require.NoError(t, err)
	want := persist(t, before)

	require.Equal(t, 2, b.apply(CmdPruneAudit, PruneAudit{Before: t0.Add(48 * time.Hour), Now: t0.Add(100 * 24 * time.Hour)}))
	require.Equal(t, []uint64{4, 3}, seqs(b.fsm.Audit(AuditQuery{Limit: 10}).Records))
	require.Equal(t, 0, b.apply(CmdPruneAudit, PruneAudit{Before: t0.Add(48 * time.Hour), Now: t0.Add(100 * 24 * time.Hour)}))

	// A snapshot taken before the prune still holds what it held.
	again, err := b.fsm.Snapshot()
	require.NoError(t, err)
	require.NotEqual(t, string(want), string(persist(t, again)))
	require.Equal(t, string(want), string(persist(t, before)))

	// Numbers are never given twice, even once every record is gone.
	require.Equal(t, 2, b.apply(CmdPruneAudit, PruneAudit{Before: t0.Add(1000 * time.Hour), Now: t0}))
	r := roundTrip(t, b.fsm)
	require.Zero(t, r.AuditLen())
	rb := &fsmBundle{t: t, fsm: r, index: b.index, term: 1}
	require.Equal(t, uint64(5), rb.apply(CmdRecordAudit, auditAt(t0, "ci", "task.submit", "k")))
}

func TestAuditSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.apply(CmdRecordAudit, auditAt(t0, "ci", "task.submit", ""))
	b.apply(CmdRecordAudit, RecordAudit{At: t0, Actor: "loopback", Role: "admin", Remote: "127.0.0.1", Via: "n2", Action: "cluster.remove", Target: "n3", Status: 200, Node: "n1"})
	r := roundTrip(t, b.fsm)
	require.Equal(t, b.fsm.Audit(AuditQuery{Limit: 10}), r.Audit(AuditQuery{Limit: 10}))
	require.Equal(t, "n2", r.Audit(AuditQuery{Limit: 1}).Records[0].Via)
	s1, _ := b.fsm.Snapshot()
	s2, _ := r.Snapshot()
	require.Equal(t, string(persist(t, s1)), string(persist(t, s2)), "the same state writes the same bytes")
}

// A snapshot from before the audit trail (no audit sections) restores
// with an empty trail, and numbering starts at 1.
func TestAuditOlderSnapshotWithoutSection(t *testing.T) {
	t.Parallel()
	b := busyFSM(t, 3)
	s, err := b.fsm.Snapshot()
	require.NoError(t, err)
	old := persist(t, s)
	require.NotContains(t, string(old), "audit", "a cluster without records writes no audit section")
	r := NewFSM()
	require.NoError(t, r.Restore(bytes.NewReader(old)))
	require.Zero(t, r.AuditLen())
	rb := &fsmBundle{t: t, fsm: r, index: b.index, term: 1}
	require.Equal(t, uint64(1), rb.apply(CmdRecordAudit, auditAt(t0, "ci", "task.submit", "k")))
	// And a version-1 (JSON) snapshot, which never had one.
	r1 := NewFSM()
	require.NoError(t, r1.Restore(bytes.NewReader(persistV1(t, b.fsm))))
	require.Zero(t, r1.AuditLen())
}

// A flood of writes costs at most AuditCap records: the oldest go, and
// the count of what went is kept.
func TestAuditCap(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	rec := auditAt(t0, "ci", "task.submit", "k")
	cmd, err := Encode(CmdRecordAudit, rec)
	require.NoError(t, err)
	for i := range AuditCap + 3 {
		b.fsm.Apply(uint64(i+1), 1, cmd)
	}
	require.Equal(t, AuditCap, b.fsm.AuditLen())
	page := b.fsm.Audit(AuditQuery{Limit: 1})
	require.Equal(t, uint64(AuditCap+3), page.Records[0].Seq)
	require.Equal(t, uint64(3), page.Capped)
	oldest := b.fsm.Audit(AuditQuery{Limit: AuditCap + 10}).Records
	require.Equal(t, uint64(4), oldest[len(oldest)-1].Seq, "the three oldest were dropped")
	require.Equal(t, uint64(3), roundTrip(t, b.fsm).Audit(AuditQuery{Limit: 1}).Capped, "the count survives a snapshot")
}

// RecordAudits stores its records as that many RecordAudit in a row
// would: the same numbers, folds and state; a refused record is answered
// with its error and does not stop the ones after it.
func TestRecordAuditsIsRecordAuditInARow(t *testing.T) {
	t.Parallel()
	recs := []RecordAudit{
		auditAt(t0, "ci", "task.submit", "k1"),
		unchangedAt(t0.Add(time.Second), "ci", "task.submit", "k1"),
		{At: t0, Actor: "ci"}, // no action: refused
		auditAt(t0.Add(2*time.Second), "ops", "rule.pause", "daily"),
		unchangedAt(t0.Add(3*time.Second), "ci", "task.submit", "k1"),
	}
	one, batch := setupFSM(t), setupFSM(t)
	var want []any
	for _, r := range recs {
		want = append(want, one.apply(CmdRecordAudit, r))
	}
	got := batch.apply(CmdRecordAudits, RecordAudits{Records: recs}).([]any)
	require.Len(t, got, len(recs))
	for i := range recs {
		if err, ok := want[i].(error); ok {
			require.EqualError(t, got[i].(error), err.Error(), "record %d", i)
			continue
		}
		require.Equal(t, want[i], got[i], "record %d", i)
	}
	require.Equal(t, one.fsm.Audit(AuditQuery{Limit: 10}), batch.fsm.Audit(AuditQuery{Limit: 10}))
	state := func(f *FSM) []byte {
		snap, err := f.Snapshot()
		require.NoError(t, err)
		var out bytes.Buffer
		require.NoError(t, snap.(*fsmSnapshot).Persist(&out))
		_, body, _ := bytes.Cut(out.Bytes(), []byte("\n")) // the header counts the entries applied
		return body
	}
	require.Equal(t, state(one.fsm), state(batch.fsm), "the same state")
}

// Admit holds RecordAudits while a member applies FSM version 4: it has
// no older body, and the API records one write an entry until then.
func TestAdmitRecordAuditsWaitsForEveryMember(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	b.apply(CmdUpsertMember, Member{ID: "n1", FSMVersion: FSMVersion})
	b.apply(CmdUpsertMember, Member{ID: "n2", FSMVersion: 4})
	cmd, err := Encode(CmdRecordAudits, RecordAudits{Records: []RecordAudit{auditAt(t0, "ci", "task.submit", "k")}})
	require.NoError(t, err)
	_, err = b.fsm.Admit(cmd)
	require.ErrorIs(t, err, ErrMembersBehind)
	b.apply(CmdUpsertMember, Member{ID: "n2", FSMVersion: FSMGroupedWrites})
	_, err = b.fsm.Admit(cmd)
	require.NoError(t, err)
}
