package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// inProcess is three whole nodes in one process — the engine's state
// machine and leader loops, Raft, the Lua rules and the mock plugin — as
// `herald dev` runs them, on setupE2E's addresses, rules and outbox.
type inProcess struct {
	*e2eCluster
	nodes   []*node
	stopped map[*node]bool
}

// startInProcess starts the three nodes and returns once they are one
// cluster and its rule has delivered two slots.
func startInProcess(t *testing.T) *inProcess {
	p := &inProcess{e2eCluster: setupE2E(t), stopped: map[*node]bool{}}
	t.Cleanup(func() {
		for _, n := range p.nodes {
			if !p.stopped[n] {
				n.stop()
			}
		}
	})
	log := newLogger("error")
	channels := map[string]map[string]any{"mock": {"plugin": "mock", "outbox": p.outbox}}
	for i, a := range p.e2eCluster.nodes {
		cfg := nodeConfig{NodeID: a.id, DataDir: a.data, RaftAddr: a.raft, HTTPAddr: a.http,
			Rules: p.rules, Channels: channels, devTimeouts: true, raftLogLevel: "error"}
		if i == 0 {
			cfg.Bootstrap = true
		} else {
			cfg.Join = p.e2eCluster.nodes[0].http
		}
		n, err := startNode(context.Background(), cfg, log.With("node", a.id))
		require.NoError(t, err)
		p.nodes = append(p.nodes, n)
	}
	eventually(t, 20*time.Second, "three members", func() bool {
		l := p.leader()
		return l != nil && len(l.raft.Status().Members) == 3
	})
	eventually(t, 30*time.Second, "slots delivered", func() bool { return p.slotsDelivered() >= 2 })
	return p
}

// leader is the running node that leads, or nil.
func (p *inProcess) leader() *node {
	for _, n := range p.nodes {
		if !p.stopped[n] && n.raft.IsLeader() {
			return n
		}
	}
	return nil
}

// stop stops node n for good.
func (p *inProcess) stop(n *node) {
	n.stop()
	p.stopped[n] = true
}

// running are the nodes not stopped.
func (p *inProcess) running() []*node {
	var out []*node
	for _, n := range p.nodes {
		if !p.stopped[n] {
			out = append(out, n)
		}
	}
	return out
}
