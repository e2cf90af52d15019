package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heraldhq/herald/engine"
)

// A follower's view of the leader's clock: the leader stamps the time it
// acts by into its commands (engine.Stamp); a follower compares the
// newest one with its own clock, outside Apply, and says when they are
// further apart than MaxClockSkew. The leader's own check (engine/leader's
// clock watch, fed by the member reports) is what holds a skewed leader;
// this is what a follower can see of it, and of a leader on a build
// without that check.

// leaderClockEvery is how often a follower looks at the newest stamp: a
// stamp is read within this of its apply, which bounds the error.
const leaderClockEvery = time.Second

// leaderClockStrikes: a follower warns once this many looks in a row
// found the leader's clock off, so that the last entries of a catch-up
// (stamped a while ago) do not look like a skew.
const leaderClockStrikes = 3

// stamper is the part of the state machine that keeps the newest stamp
// (engine.FSM); a state machine without it is not watched.
type stamper interface {
	LastStamp() (engine.Stamp, bool)
}

// watchLeaderClock runs on every node until it shuts down.
func (n *Node) watchLeaderClock(ctx context.Context) {
	st, ok := n.sm.(stamper)
	if !ok {
		return
	}
	t := time.NewTicker(leaderClockEvery)
	defer t.Stop()
	var (
		seen    uint64
		strikes int
		warned  bool
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.shutdownCh:
			return
		case <-t.C:
		}
		s, ok := st.LastStamp()
		if !ok || s.Index == seen {
			continue
		}
		seen = s.Index
		if n.raft.State() != raft.Follower || n.raft.AppliedIndex() < n.raft.CommitIndex() {
			n.leaderOffset.Store(0)
			continue // the leader's stamps are its own; a catch-up's are old
		}
		d := time.Until(s.At)
		n.leaderOffset.Store(int64(d))
		if d <= n.cfg.MaxClockSkew && d >= -n.cfg.MaxClockSkew {
			if warned {
				n.log.Info("the leader's clock agrees with this node's again", "leader", n.leaderID(), "offset", d.Round(time.Millisecond))
			}
			strikes, warned = 0, false
			continue
		}
		strikes++
		if strikes >= leaderClockStrikes && !warned {
			warned = true
			n.log.Warn("the leader's clock differs from this node's by more than max_clock_skew: the times it stamps are off, or this node's clock is",
				"leader", n.leaderID(), "offset", d.Round(time.Second), "max_clock_skew", n.cfg.MaxClockSkew)
		}
	}
}

// LeaderClockOffset is the leader's clock minus this node's as its last
// stamp showed (0 on the leader, and before any stamp was seen).
func (n *Node) LeaderClockOffset() time.Duration { return time.Duration(n.leaderOffset.Load()) }

// TransferLeadershipTo hands leadership to the voter id (the clock watch's
// handover) and returns once this node knows the new leader; it is
// transfer-leader's transferTo, behind a check that this node leads.
func (n *Node) TransferLeadershipTo(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return n.errNotLeader()
	}
	_, err := n.transferTo(ctx, id)
	return err
}
