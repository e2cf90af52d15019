package leader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// TestLeaderWritesPackedOnlyOnceEveryMemberReadsThem: the leader's
// pipe (plan, claim, results) writes the JSON commands while a member's
// record says FSM version 1, and their packed twins from the moment every
// member's says 2.
func TestLeaderWritesPackedOnlyOnceEveryMemberReadsThem(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, slot.Add(-time.Second), engine.Rule{Name: "r", Schedule: "* * * * *", Channel: "mock"})
	tl := &typeLog{localLog: s.log}
	s.cfg.Replicator = tl
	s.rules.plan["r"] = to("alice", "bob")
	s.apply(engine.CmdUpsertMember, engine.Member{ID: "n1", FSMVersion: engine.FSMVersion})
	s.apply(engine.CmdUpsertMember, engine.Member{ID: "n2"}) // a build before FSM versions
	s.lead("n1")
	s.advance(slot.Add(30*time.Second), time.Second)
	up, err := engine.Encode(engine.CmdUpsertMember, engine.Member{ID: "n2", FSMVersion: engine.FSMVersion}) // upgraded
	require.NoError(t, err)
	_, err = tl.Apply(s.ctx, up)
	require.NoError(t, err)
	s.advance(slot.Add(90*time.Second), time.Second)

	tl.mu.Lock()
	defer tl.mu.Unlock()
	upgraded := false
	seen := map[engine.CommandType]bool{}
	for _, typ := range tl.types {
		if typ == engine.CmdUpsertMember {
			upgraded = true
		}
		if _, jsonTwin := engine.PackedTwin(typ); jsonTwin || typ == engine.CmdAddDeliveriesPacked || typ == engine.CmdClaimPacked || typ == engine.CmdRecordResultsPacked {
			seen[typ] = true
			_, isJSON := engine.PackedTwin(typ)
			require.Equal(t, !upgraded, isJSON, "%s written %s n2 was upgraded", typ, map[bool]string{false: "before", true: "after"}[upgraded])
		}
	}
	for _, typ := range []engine.CommandType{engine.CmdAddDeliveries, engine.CmdClaim, engine.CmdRecordResults, engine.CmdAddDeliveriesPacked, engine.CmdClaimPacked, engine.CmdRecordResultsPacked} {
		require.True(t, seen[typ], "%s was written", typ)
	}
}
