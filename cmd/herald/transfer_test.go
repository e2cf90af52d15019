package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/api"
)

// TestTransferLeaderCmd: `herald cluster transfer-leader ID` sent to a
// follower moves leadership to ID, is recorded in the audit trail by the
// new leader, and the rule goes on firing; without an id leadership moves
// to another voter. Then stopping the leader (as SIGTERM does) hands over:
// a follower leads as soon as the stop returns.
func TestTransferLeaderCmd(t *testing.T) {
	c := startInProcess(t)
	old := c.leader()
	require.NotNil(t, old)
	var via, target *node
	for _, n := range c.nodes {
		switch {
		case n == old:
		case via == nil:
			via = n
		default:
			target = n
		}
	}
	out, err := runHerald(t, "cluster", "transfer-leader", target.cfg.NodeID, "--addr", via.cfg.HTTPAddr)
	require.NoError(t, err)
	require.Equal(t, target.cfg.NodeID+" leads\n", out)
	require.True(t, target.raft.IsLeader())

	// Recorded right after the answer went out.
	eventually(t, 10*time.Second, "the transfer in the audit trail", func() bool {
		var trail api.AuditResponse
		if getJSON(target.cfg.HTTPAddr, "/v1/audit", &trail) != nil || len(trail.Records) == 0 {
			return false
		}
		rec := trail.Records[0]
		return rec.Action == "cluster.transfer-leader" && rec.Target == target.cfg.NodeID && rec.Node == target.cfg.NodeID
	})

	out, err = runHerald(t, "cluster", "transfer-leader", "--addr", old.cfg.HTTPAddr)
	require.NoError(t, err)
	next := c.leader()
	require.NotNil(t, next)
	require.NotEqual(t, target, next)
	require.Equal(t, next.cfg.NodeID+" leads\n", out)

	before := c.slotsDelivered()
	eventually(t, 30*time.Second, "slots delivered after the transfers", func() bool { return c.slotsDelivered() >= before+2 })

	c.stop(next)
	require.NotNil(t, c.leader(), "a follower leads as soon as the old leader stopped")
	c.requireEachSlotOnce()
}
