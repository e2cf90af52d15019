package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// TestLeaderRecordsMemberBuilds: the leader learns each member's FSM
// version from its status and records it, also after a record says
// otherwise (a member restarted on another build).
func TestLeaderRecordsMemberBuilds(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	current := func() bool {
		for _, tn := range nodes {
			if m := leader.sm.member(tn.id); m.FSMVersion != engine.FSMVersion || m.Build != engine.Build {
				return false
			}
		}
		return true
	}
	require.Eventually(t, current, 20*time.Second, 20*time.Millisecond, "every member's build recorded")

	var follower *testNode
	for _, tn := range nodes {
		if tn != leader {
			follower = tn
		}
	}
	stale := leader.sm.member(follower.id)
	stale.FSMVersion, stale.Build = 0, ""
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, leader.node.upsertMember(ctx, stale))
	require.Eventually(t, current, 20*time.Second, 20*time.Millisecond, "the stale record is corrected")

	st := follower.node.Status()
	require.Equal(t, engine.FSMVersion, st.FSMVersion)
	for _, m := range st.Members {
		require.Equal(t, engine.FSMVersion, m.FSMVersion, m.ID)
	}
}

// A member's build is recorded when it joins, not at the leader's next
// look: until then it would count as FSM version 1 and every newer command
// (the join's own audit record among them) would be refused.
func TestJoinRecordsTheMembersBuild(t *testing.T) {
	t.Parallel()
	// The leader looks at its members' builds once, when it starts to
	// lead (before n2 exists), and not again during the test.
	nodes := newCluster(t, 2, nil, func(c *Config) { c.ReconcileInterval = time.Hour })
	leader := leaderOf(t, nodes)
	for _, tn := range nodes {
		m := leader.sm.member(tn.id)
		require.Equal(t, engine.FSMVersion, m.FSMVersion, tn.id)
		require.Equal(t, engine.Build, m.Build, tn.id)
	}
}
