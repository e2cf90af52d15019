package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrClusterExists means a node asked to bootstrap found, among its peers,
// a live cluster that does not list it: bootstrapping would form a second
// cluster beside it.
var ErrClusterExists = errors.New("a cluster already exists")

// guardBootstrap runs before a node with an empty data dir bootstraps. An
// empty data dir on a node configured to bootstrap is either the first
// start of a new cluster, or a member whose data dir was wiped while its
// cluster lives on; bootstrapping in the second case forms a new cluster
// id beside the old one (and, reached by the old leader, a node whose log
// and state machine disagree). So first:
//
//  1. ask the configured peers: a peer that is a member of a cluster
//     listing this node means "rejoin it" (through that peer); one whose
//     cluster does not list this node is an error (ErrClusterExists);
//  2. listen for BootstrapWait: a live leader that still counts this node
//     as a voter heartbeats it within a few heartbeat timeouts, and raft
//     follows it. The node then stays in that cluster.
//
// It reports whether the node rejoined (Start is done).
func (n *Node) guardBootstrap(ctx context.Context) (bool, error) {
	for _, peer := range n.cfg.Peers {
		if peer == "" || peer == n.cfg.HTTPAddr {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, n.cfg.DialTimeout)
		st, err := n.clientFor(peer).Status(pctx)
		cancel()
		if err != nil {
			n.log.Info("peer does not answer; it may not be started yet", "peer", peer, "err", err)
			continue
		}
		if st.ClusterID == "" && len(st.Members) == 0 {
			continue // a node waiting to join, like this one
		}
		listed := slices.ContainsFunc(st.Members, func(m MemberStatus) bool { return m.ID == n.cfg.NodeID })
		if !listed {
			ids := make([]string, 0, len(st.Members))
			for _, m := range st.Members {
				ids = append(ids, m.ID)
			}
			return false, fmt.Errorf("%w: peer %s is a member of cluster %s (members %s), which does not list %s; "+
				"bootstrapping would form a second cluster: start this node with --join %s instead of --bootstrap",
				ErrClusterExists, peer, st.ClusterID, strings.Join(ids, ", "), n.cfg.NodeID, peer)
		}
		n.startMode = startRejoin
		n.log.Warn("data dir is empty but this node's cluster is alive: rejoining it as the same member instead of bootstrapping",
			"peer", peer, "cluster_id", st.ClusterID)
		if err := n.joinVia(ctx, peer); err != nil {
			return true, err
		}
		n.bg.Go(func() { n.learnClusterID(n.bgCtx) })
		return true, n.waitLeader(ctx)
	}
	if n.cfg.BootstrapWait <= 0 {
		return false, nil
	}
	n.log.Info("no raft state: listening for an existing cluster before bootstrapping a new one", "wait", n.cfg.BootstrapWait)
	wctx, cancel := context.WithTimeout(ctx, n.cfg.BootstrapWait)
	defer cancel()
	err := poll(wctx, n.shutdownCh, 20*time.Millisecond, n.contacted)
	switch {
	case errors.Is(err, ErrShutdown):
		return true, err
	case ctx.Err() != nil:
		return true, ctx.Err()
	case err == nil:
		_, leader := n.raft.LeaderWithID()
		n.startMode = startRejoin
		n.log.Warn("data dir is empty but a live cluster counts this node as a member: following it instead of bootstrapping",
			"leader", leader)
		n.bg.Go(func() { n.learnClusterID(n.bgCtx) })
		n.bg.Go(func() { n.reconcileSelf(n.bgCtx) })
		return true, n.waitLeader(ctx)
	}
	return false, nil
}

// contacted reports whether another node's Raft reached this one: a
// leader's heartbeat sets the leader, a candidate's vote request the term.
func (n *Node) contacted() bool {
	_, leader := n.raft.LeaderWithID()
	return leader != "" || n.raft.CurrentTerm() > 0 || n.raft.LastIndex() > 0
}
