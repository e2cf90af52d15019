package cluster

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/enginetest"
)

// A leader whose stamps run an hour ahead: each follower's gauge says
// +1h and, once three looks in a row agree, it warns, naming the leader;
// the leader's own gauge stays 0.
func TestFollowerSaysTheLeadersClockIsOff(t *testing.T) {
	t.Parallel()
	logs := map[string]*enginetest.Buffer{}
	var mu sync.Mutex
	nodes := newCluster(t, 3, nil, func(c *Config) {
		b := &enginetest.Buffer{}
		mu.Lock()
		logs[c.NodeID] = b
		mu.Unlock()
		c.Logger = slog.New(slog.NewTextHandler(b, nil))
	})
	leader := leaderOf(t, nodes)
	require.Eventually(t, func() bool {
		cmd, err := encodeTest(cmdStamp, time.Now().Add(time.Hour))
		require.NoError(t, err)
		apply(t, nodes, cmd)
		for _, f := range followersOf(nodes, leader) {
			mu.Lock()
			warned := strings.Contains(logs[f.id].String(), "the leader's clock differs from this node's by more than max_clock_skew")
			mu.Unlock()
			if d := f.node.LeaderClockOffset(); !warned || d < time.Hour-5*time.Second || d > time.Hour {
				return false
			}
		}
		return true
	}, waitTimeout, 200*time.Millisecond, "followers see the leader's clock an hour ahead")
	require.Zero(t, leader.node.LeaderClockOffset())
	f := followersOf(nodes, leader)[0]
	mu.Lock()
	require.Contains(t, logs[f.id].String(), "leader="+leader.id)
	mu.Unlock()
	t.Logf("follower %s: herald_leader_clock_offset_seconds %.1f", f.id, f.node.LeaderClockOffset().Seconds())
}

// TransferLeadershipTo hands leadership to the member named.
func TestTransferLeadershipTo(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	to := followersOf(nodes, leader)[1]
	require.ErrorIs(t, leader.node.TransferLeadershipTo(ctxT(t), "n9"), ErrUnknownMember)
	require.NoError(t, leader.node.TransferLeadershipTo(ctxT(t), to.id))
	require.Eventually(t, func() bool { return to.node.IsLeader() }, waitTimeout, 10*time.Millisecond)
}
