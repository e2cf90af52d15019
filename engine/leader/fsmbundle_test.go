package leader

// Helpers copied from the engine's own tests (fsm_test.go, snapshot_test.go):
// the engine's internal tests cannot import a package that imports the
// engine, so the few helpers both sides' tests use live in each.

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

var t0 = time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)

// fsmBundle applies commands to an FSM as the log would, at a given term.
type fsmBundle struct {
	t     *testing.T
	fsm   *engine.FSM
	index uint64
	term  uint64
	// packed writes the commands that have a packed twin packed, as a
	// leader does once every member reads them.
	packed bool
}

func setupFSM(t *testing.T) *fsmBundle {
	return &fsmBundle{t: t, fsm: engine.NewFSM(), term: 1}
}

func (b *fsmBundle) apply(ct engine.CommandType, body any) any {
	b.t.Helper()
	oldest := uint16(1)
	if b.packed {
		oldest = engine.FSMVersion
	}
	cmd, err := engine.EncodeFor(ct, body, oldest)
	require.NoError(b.t, err)
	b.index++
	return b.fsm.Apply(b.index, b.term, cmd)
}

// planned starts a run at t0 with the given recipients, all due at t0.
func (b *fsmBundle) planned(rule string, recipients ...string) string {
	key := engine.RunKey(rule, t0)
	require.Nil(b.t, b.apply(engine.CmdStartRun, engine.StartRun{Key: key, Rule: rule, Slot: t0, Now: t0}))
	var nds []engine.NewDelivery
	for _, r := range recipients {
		nds = append(nds, engine.NewDelivery{ID: engine.DeliveryID(key, r), Recipient: r, Channel: "mock",
			Payload: json.RawMessage(`{"msgtype":"text","content":"hi"}`), Priority: heraldtype.PriorityNormal,
			NotBefore: t0, Deadline: t0.Add(2 * time.Hour)})
	}
	require.Equal(b.t, len(recipients), b.apply(engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: nds}))
	require.Nil(b.t, b.apply(engine.CmdFinishPlan, engine.FinishPlan{RunKey: key, Now: t0}))
	return key
}

func (b *fsmBundle) claim(leader string, now time.Time, ids ...string) []engine.Claimed {
	b.t.Helper()
	return b.apply(engine.CmdClaim, engine.ClaimDeliveries{IDs: ids, Leader: leader, Now: now, Timeout: 30 * time.Second}).(engine.ClaimResult).Claimed
}

func persist(t *testing.T, s engine.Snapshot) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, s.Persist(&buf))
	s.Release()
	return buf.Bytes()
}
