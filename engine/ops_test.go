package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
)

func mustEncode(t testing.TB, ct CommandType, body any) []byte {
	t.Helper()
	b, err := Encode(ct, body)
	require.NoError(t, err)
	return b
}

// TestResumeIndexesAsApplyDoes: a resume puts back in the due index what
// putDelivery would index, no more. The members of a digest are pending
// but go with their digest (no due time): a resume that indexed them at
// the zero time left an entry no later change removed, so Due handed the
// executor the member (never claimable) every pass, and, once retention
// pruned it, a nil delivery.
func TestResumeIndexesAsApplyDoes(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	var ids []string
	for _, run := range []string{"a", "b"} {
		key := TaskRunKey(run)
		require.Nil(t, b.apply(CmdStartRun, StartRun{Key: key, Rule: "r", Slot: t0, Now: t0}))
		id := DeliveryID(key, "ann")
		require.Equal(t, 1, b.apply(CmdAddDeliveries, AddDeliveries{RunKey: key, Deliveries: []NewDelivery{{ID: id, Recipient: "ann",
			Channel: "mock", Priority: heraldtype.PriorityNormal, NotBefore: t0, Deadline: t0.Add(time.Hour)}}}))
		ids = append(ids, id)
	}
	dg := DigestID("r", "ann", ids)
	require.Nil(t, b.apply(CmdFoldDigest, FoldDigest{ID: dg, Members: ids, Payload: []byte(`{}`), Now: t0}))
	require.NotNil(t, b.apply(CmdPauseRule, PauseRule{Rule: "r", By: "op", Now: t0}))
	require.Nil(t, b.apply(CmdResumeRule, ResumeRule{Rule: "r", By: "op", Now: t0}))

	dueIDs := func(f *FSM) []string {
		var out []string
		for _, d := range f.Due(t0.Add(time.Minute), 100) {
			require.NotNil(t, d, "Due returned a delivery that is not in the state")
			out = append(out, d.ID)
		}
		return out
	}
	require.Equal(t, []string{dg}, dueIDs(b.fsm), "the digest, not its members")

	// The digest is sent; a week later retention prunes all three.
	c := b.claim("n1", t0.Add(time.Second), dg)
	require.Len(t, c, 1)
	require.Equal(t, 1, b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: t0.Add(2 * time.Second),
		Results: []Settlement{{ID: dg, Seq: c[0].Seq, Status: heraldtype.StatusSent}}}))
	require.Empty(t, dueIDs(b.fsm))
	b.apply(CmdPrune, Prune{Before: t0.Add(8 * 24 * time.Hour), LedgerBefore: t0})
	require.Empty(t, dueIDs(b.fsm))
	_, ok := b.fsm.NextDue(time.Time{}.Add(-time.Nanosecond)) // even at the zero time
	require.False(t, ok, "nothing left to wake for")
}
