package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/sync/singleflight"
)

// ReadyLag is how many log entries a member may be behind the leader and
// still count as caught up (GET /v1/ready): about a second of a busy
// cluster's writes, far less than a joining member's backlog.
const ReadyLag = 1000

// readyStale is how old the leader's applied index may be when a probe
// uses it: probes come every few seconds, so each asks the leader at most
// about once, and a burst of probes asks once (singleflight).
const readyStale = time.Second

// readyAskTimeout bounds the question to the leader: Kubernetes gives a
// probe one second by default.
const readyAskTimeout = 500 * time.Millisecond

// Readiness is whether this node is a caught-up member of a cluster that
// has a leader (GET /v1/ready).
type Readiness struct {
	// Member: this node is in the Raft configuration (voter or not).
	Member bool
	// Leader: a leader is known.
	Leader bool
	// CaughtUp: this node leads, or its applied index is within ReadyLag of
	// the leader's.
	CaughtUp bool
	// Applied is this node's applied index, LeaderApplied the leader's as
	// it last answered (0 when unknown).
	Applied, LeaderApplied uint64
	// Reasons say, for each check that failed, why (no addresses: the
	// answer is public).
	Reasons []string
}

// leaderProgress caches the leader's applied index for Ready.
type leaderProgress struct {
	mu      sync.Mutex
	leader  string // whose index
	applied uint64
	at      time.Time
	flight  singleflight.Group
}

// Ready reports this node's readiness. A follower asks the leader for its
// applied index (GET /v1/cluster/status, with this node's token) at most
// once per readyStale; Raft itself tells a follower only as much of the
// leader's commit index as the follower already holds.
func (n *Node) Ready(ctx context.Context) Readiness {
	r := Readiness{Applied: n.raft.AppliedIndex()}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			r.Member = r.Member || s.ID == raft.ServerID(n.cfg.NodeID)
		}
	}
	if !r.Member {
		r.Reasons = append(r.Reasons, "member: this node is not in a cluster's configuration yet (joining, or waiting to be added)")
	}
	leader := n.leaderID()
	r.Leader = leader != ""
	if !r.Leader {
		r.Reasons = append(r.Reasons, "leader: no leader is known (an election, or no quorum)")
		return r
	}
	if n.raft.State() == raft.Leader {
		r.CaughtUp, r.LeaderApplied = true, r.Applied
		return r
	}
	applied, err := n.leaderApplied(ctx, leader)
	switch {
	case err != nil:
		r.Reasons = append(r.Reasons, "caught_up: the leader's progress is unknown: "+err.Error())
	case applied > r.Applied+ReadyLag:
		r.LeaderApplied = applied
		r.Reasons = append(r.Reasons, fmt.Sprintf("caught_up: applied index %d is %d behind the leader's %d (at most %d)",
			r.Applied, applied-r.Applied, applied, ReadyLag))
	default:
		r.LeaderApplied, r.CaughtUp = applied, true
	}
	return r
}

// leaderApplied is the leader's applied index, from the cache when it is
// fresh and the same leader's.
func (n *Node) leaderApplied(ctx context.Context, leader string) (uint64, error) {
	p := &n.progress
	p.mu.Lock()
	if p.leader == leader && time.Since(p.at) < readyStale {
		defer p.mu.Unlock()
		return p.applied, nil
	}
	p.mu.Unlock()
	v, err, _ := p.flight.Do(leader, func() (any, error) {
		applied, err := n.askLeaderApplied(ctx, leader)
		if err != nil {
			return uint64(0), err
		}
		p.mu.Lock()
		p.leader, p.applied, p.at = leader, applied, time.Now()
		p.mu.Unlock()
		return applied, nil
	})
	if err != nil {
		return 0, err
	}
	return v.(uint64), nil
}

// askLeaderApplied asks leader for its applied index now (GET
// /v1/cluster/status, with this node's token). The errors name no
// address: Ready's answer is public.
func (n *Node) askLeaderApplied(ctx context.Context, leader string) (uint64, error) {
	addr := n.memberHTTP(leader)
	if addr == "" {
		return 0, errors.New("the leader's member record is not applied here yet")
	}
	ctx, cancel := context.WithTimeout(ctx, readyAskTimeout)
	defer cancel()
	st, err := n.clientFor(addr).Status(ctx)
	if err != nil {
		return 0, errors.New("the leader did not answer in time")
	}
	return st.AppliedIndex, nil
}
