package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// ErrForeignCluster means a node's data dir holds the state of another
// cluster than the one it is asked to join. Raft cannot tell two clusters
// apart (both start at term 1 with the same first entries), so such a node
// could be added as a voter and accept the new cluster's entries on top of
// a state machine built from the old one's.
var ErrForeignCluster = errors.New("data dir belongs to another cluster")

// clusterIDKey keeps the cluster's id in raft's stable store (raft.db),
// beside raft's own keys: the bootstrapping node draws it, the others learn
// it when they join.
var clusterIDKey = []byte("HeraldClusterID")

func newClusterID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// ClusterID is the id of the cluster this node belongs to, or "" if it has
// not learnt it yet (or its data dir predates cluster ids).
func (n *Node) ClusterID() string {
	n.idMu.Lock()
	defer n.idMu.Unlock()
	return n.clusterID
}

func (n *Node) setClusterID(id string) error {
	if err := n.store.Set(clusterIDKey, []byte(id)); err != nil {
		return fmt.Errorf("store cluster id: %w", err)
	}
	n.idMu.Lock()
	n.clusterID = id
	n.idMu.Unlock()
	return nil
}

// checkSameCluster runs in Start on a node with state and a join address:
// if that node answers with another cluster id than ours, this data dir is
// not for that cluster and starting would be a mistake. If it does not
// answer, the check is skipped (the node may be the first one back).
func (n *Node) checkSameCluster(ctx context.Context, addr string) error {
	ours := n.ClusterID()
	if ours == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.DialTimeout)
	defer cancel()
	st, err := n.clientFor(addr).Status(ctx)
	if err != nil {
		n.log.Warn("cannot check which cluster the join address belongs to; starting anyway", "join", addr, "err", err)
		return nil
	}
	if st.ClusterID != "" && st.ClusterID != ours {
		return fmt.Errorf("%w: %s holds the state of cluster %s, but %s is in cluster %s: start this node with an empty data dir to join it",
			ErrForeignCluster, n.cfg.DataDir, ours, addr, st.ClusterID)
	}
	return nil
}

// learnClusterID runs on a node that has no cluster id yet (added by
// `herald cluster join`, or restarted before it learnt it): it asks the
// leader once it knows one.
func (n *Node) learnClusterID(ctx context.Context) {
	t := time.NewTicker(n.cfg.ReconcileInterval)
	defer t.Stop()
	for n.ClusterID() == "" {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		addr := n.LeaderHTTPAddr()
		if addr == "" || n.IsLeader() {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, n.cfg.DialTimeout)
		st, err := n.clientFor(addr).Status(rctx)
		cancel()
		switch {
		case err != nil:
			n.log.Debug("asking the leader for the cluster id failed; will retry", "err", err)
		case st.ClusterID == "":
			return // a cluster from before cluster ids
		default:
			if err := n.setClusterID(st.ClusterID); err != nil {
				n.log.Warn("cannot keep the cluster id", "err", err)
			}
			return
		}
	}
}

// Failed is closed when the node found that it must stop: its data dir
// holds another cluster than the one whose leader it follows (Err says
// which). The agent stops on it; a node that goes on would vote and
// acknowledge entries with a log and state machine that are not this
// cluster's.
func (n *Node) Failed() <-chan struct{} { return n.failed }

// Err is the reason Failed closed, or nil.
func (n *Node) Err() error {
	select {
	case <-n.failed:
		return n.failErr
	default:
		return nil
	}
}

func (n *Node) fail(err error) {
	n.failOnce.Do(func() {
		n.failErr = err
		close(n.failed)
	})
}

// watchClusterID is the last line against a second cluster: whenever
// another node leads, it asks that leader once for its cluster id. A leader
// of another cluster means this node's state was formed apart from it (a
// wiped member that bootstrapped before the old leader reached it, a copied
// data dir) while the old cluster still counts it as a member: the node
// fails with ErrForeignCluster instead of looking healthy.
func (n *Node) watchClusterID(ctx context.Context) {
	t := time.NewTicker(n.cfg.ReconcileInterval)
	defer t.Stop()
	checked := "" // the leader last found to be of our cluster
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ours := n.ClusterID()
		_, leader := n.raft.LeaderWithID()
		if ours == "" || leader == "" || string(leader) == n.cfg.NodeID || string(leader) == checked {
			continue
		}
		addr := n.memberHTTP(string(leader))
		if addr == "" {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, n.cfg.DialTimeout)
		st, err := n.clientFor(addr).Status(rctx)
		cancel()
		if err != nil || st.NodeID != string(leader) || st.ClusterID == "" {
			continue // ask again next tick
		}
		if st.ClusterID == ours {
			checked = string(leader)
			continue
		}
		err = fmt.Errorf("%w: this node's data dir %s holds cluster %s, but it follows leader %s (at %s) of cluster %s: "+
			"its data dir was probably wiped or replaced while it was a member there; stop it, empty the data dir and start it with --join %s",
			ErrForeignCluster, n.cfg.DataDir, ours, leader, addr, st.ClusterID, addr)
		n.log.Error("stopping: this node is in another cluster than its data dir", "err", err)
		n.fail(err)
		return
	}
}
