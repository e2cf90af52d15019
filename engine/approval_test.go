package engine

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// heldRun starts a run of two, holds it and finishes its plan.
func (b *fsmBundle) heldRun(rule string) (key string, ids []string) {
	key = RunKey(rule, t0)
	require.Nil(b.t, b.apply(CmdStartRun, StartRun{Key: key, Rule: rule, Slot: t0, Manual: true, Token: "ops-a", Now: t0}))
	require.Nil(b.t, b.apply(CmdHoldRun, HoldRun{RunKey: key, Over: 1, Count: 2, Preview: json.RawMessage(`{"msgtype":"text","content":"hi"}`), Now: t0}))
	var nds []NewDelivery
	for _, r := range []string{"alice", "bob"} {
		nds = append(nds, NewDelivery{ID: DeliveryID(key, r), Recipient: r, Channel: "mock", Payload: json.RawMessage(`{}`),
			Priority: heraldtype.PriorityNormal, NotBefore: t0, Deadline: t0.Add(2 * time.Hour)})
		ids = append(ids, DeliveryID(key, r))
	}
	require.Equal(b.t, 2, b.apply(CmdAddDeliveries, AddDeliveries{RunKey: key, Deliveries: nds}))
	require.Nil(b.t, b.apply(CmdFinishPlan, FinishPlan{RunKey: key, Now: t0}))
	return key, ids
}

// A held run's deliveries cannot be claimed, are due only at their
// deadline (to expire), and stay held across a snapshot, whose header
// then asks for FSM version 4; approval makes them claimable.
func TestHeldRunIsNotClaimableAndSurvivesASnapshot(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	plain := setupFSM(t)
	plain.planned("r", "alice")
	snap, err := plain.fsm.Snapshot()
	require.NoError(t, err)
	require.NotContains(t, string(persist(t, snap)), `"fsm_version":4`, "nothing of version 4 in it")

	key, ids := b.heldRun("mass")
	run, _ := b.fsm.Run(key)
	require.Equal(t, RunAwaitingApproval, run.State)
	require.Equal(t, "ops-a", run.FiredToken)
	require.Empty(t, b.claim("n1", t0.Add(time.Minute), ids...))
	require.Empty(t, b.fsm.Due(t0.Add(time.Hour), 10), "not due before its deadline")
	require.Len(t, b.fsm.Due(t0.Add(2*time.Hour), 10), 2, "due at the deadline, to expire")

	snap, err = b.fsm.Snapshot()
	require.NoError(t, err)
	raw := persist(t, snap)
	require.Contains(t, string(raw[:bytes.IndexByte(raw, '\n')]), `"fsm_version":4`)
	r := setupFSM(t)
	require.NoError(t, r.fsm.Restore(bytes.NewReader(raw)))
	r.index = 100
	require.Empty(t, r.claim("n1", t0.Add(time.Minute), ids...), "still held after a restore")
	res := r.apply(CmdDecideRun, DecideRun{RunKey: key, Approve: true, By: "ops-b", Now: t0.Add(time.Minute)}).(DecideResult)
	require.Equal(t, 2, res.Released)
	require.Len(t, r.claim("n1", t0.Add(time.Minute), ids...), 2)
}

// StartRun's token needs body version 2; without one, version 1 says the
// same, so a cluster with an older member still takes every other fire.
func TestStartRunTokenDowngrade(t *testing.T) {
	t.Parallel()
	with := StartRun{Key: "k", Rule: "r", Token: "ops"}
	without := StartRun{Key: "k", Rule: "r"}
	require.False(t, with.downgrade(1))
	require.True(t, without.downgrade(1))
	cmd, err := Encode(CmdStartRun, without)
	require.NoError(t, err)
	require.Equal(t, uint8(2), cmd[1])
}

// What cannot be recalled is said at once, and nothing about it changes.
func TestNotRecallable(t *testing.T) {
	t.Parallel()
	now := t0.Add(time.Hour)
	for why, d := range map[string]*Delivery{
		"not sent (pending)":        {State: StatePending},
		"group robot":               {State: StateSent, SentAt: t0},
		"more than 24 h ago":        {State: StateSent, SentAt: now.Add(-25 * time.Hour), ProviderID: "m"},
		"already recalled":          {State: StateRecalled},
		"folded into digest digest": {State: StateSent, Digest: "digest:x", ProviderID: "m"},
	} {
		require.Contains(t, NotRecallable(d, now), why)
	}
	require.Empty(t, NotRecallable(&Delivery{State: StateSent, SentAt: t0, ProviderID: "m"}, now))
}
