package cluster

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/hashicorp/raft"
)

// Read replicas. A node started with non_voter joins with raft's
// AddNonvoter: it receives the log and applies it like any member, serves
// reads and forwards writes, but it is no part of any quorum and never
// stands for election, so a replica in a far data centre slows no commit.
// An admin promotes it (POST /v1/cluster/promote, herald cluster promote
// ID): the leader makes it a voter with AddVoter, once it answers and has
// caught up (a voter that lags or cannot be reached costs quorum, as
// probeRaft says of a join).

// promotePath is the endpoint that makes a non-voter a voter.
const promotePath = clusterPrefix + "promote"

// PromoteRequest is the body of POST /v1/cluster/promote.
type PromoteRequest struct {
	ID string `json:"id"`
}

// Suffrage names a raft suffrage as status shows it.
func suffrage(s raft.ServerSuffrage) string {
	switch s {
	case raft.Voter:
		return "voter"
	case raft.Nonvoter:
		return "nonvoter"
	default:
		return "staging"
	}
}

// handlePromote makes a non-voter a voter (on the leader).
func (n *Node) handlePromote(w http.ResponseWriter, r *http.Request) {
	if !n.IsLeader() {
		n.forward(w, r)
		return
	}
	var req PromoteRequest
	if !decode(w, r, &req) {
		return
	}
	if err := n.promote(r.Context(), req.ID); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"promoted": req.ID})
}

// promote runs on the leader: 404 for an id not in the configuration,
// 409 for a voter, or for a non-voter that does not answer or lags.
func (n *Node) promote(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: id is empty", ErrBadRequest)
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return mapRaftErr(err)
	}
	i := slices.IndexFunc(cf.Configuration().Servers, func(s raft.Server) bool { return string(s.ID) == id })
	if i < 0 {
		return fmt.Errorf("%w: %s is not in the raft configuration", ErrUnknownMember, id)
	}
	s := cf.Configuration().Servers[i]
	if s.Suffrage == raft.Voter {
		return fmt.Errorf("%w: %s is already a voter", ErrMemberConflict, id)
	}
	addr := n.memberHTTP(id)
	st, ok := n.statusOf(ctx, addr)
	if addr == "" || !ok || st.NodeID != id {
		return fmt.Errorf("%w: %s does not answer at its HTTP address %q: a voter that cannot be reached costs quorum; start it, then promote it",
			ErrMemberConflict, id, addr)
	}
	if commit := n.raft.CommitIndex(); st.AppliedIndex+ReadyLag < commit {
		return fmt.Errorf("%w: %s has applied index %d, the leader has committed %d: promote it once it has caught up (within %d)",
			ErrMemberConflict, id, st.AppliedIndex, commit, ReadyLag)
	}
	if err := wait(ctx, n.raft.AddVoter(s.ID, s.Address, 0, n.timeout(ctx))); err != nil {
		return fmt.Errorf("promote %s: %w", id, mapRaftErr(err))
	}
	n.log.Info("promoted a non-voter to voter", "id", id, "raft_addr", s.Address)
	return nil
}

// Promote makes non-voter id a voter, through the node at Addr.
func (c *Client) Promote(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodPost, promotePath, PromoteRequest{ID: id}, nil)
}
