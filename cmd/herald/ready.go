package main

import (
	"context"

	"github.com/heraldhq/herald/engine/api"
)

// ready is GET /v1/ready: a caught-up member of a cluster with a leader
// (cluster.Node.Ready), with its rules loaded and channels launched. The
// HTTP API serves before Raft starts and a join completes, so a joining
// node answers 503 until it has caught up.
func (n *node) ready(ctx context.Context) api.Readiness {
	cr := n.raft.Ready(ctx)
	rd := api.Readiness{
		Checks:  api.ReadyChecks{Member: cr.Member, Leader: cr.Leader, CaughtUp: cr.CaughtUp},
		Reasons: cr.Reasons,
	}
	// The rule set and the plugins are in place before the API serves
	// (startNode); checked all the same, so that a reordering of the
	// start cannot make a half-wired node look ready.
	rd.Checks.Rules = n.rules != nil
	if !rd.Checks.Rules {
		rd.Reasons = append(rd.Reasons, "rules: the rule set is not loaded")
	}
	rd.Checks.Channels = n.host != nil && len(n.host.Status()) > 0
	if !rd.Checks.Channels {
		rd.Reasons = append(rd.Reasons, "channels: no channel is configured")
	}
	return rd
}
