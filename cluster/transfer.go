package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// handOverWait bounds how long a leader that is shutting down waits for
// leadership to move before it stops anyway: two election timeouts, at
// least a second. Waiting longer would gain nothing: the followers of a
// leader that just stops elect one after about an election timeout. A
// handover on a healthy cluster takes one round of catch-up and a
// TimeoutNow: milliseconds on a LAN.
func (n *Node) handOverWait() time.Duration { return max(2*n.cfg.ElectionTimeout, time.Second) }

// TransferRequest is the body of POST /v1/cluster/transfer-leader: ID is
// the member to lead next; "" lets Raft pick the most up-to-date voter.
type TransferRequest struct {
	ID string `json:"id,omitempty"`
}

// TransferResponse is the answer of POST /v1/cluster/transfer-leader: who
// leads now.
type TransferResponse struct {
	Leader string `json:"leader"`
}

// TransferLeader asks the cluster to move leadership to id (any voter when
// id is ""), through the node at Addr (forwarded to the leader).
func (c *Client) TransferLeader(ctx context.Context, id string) (TransferResponse, error) {
	var out TransferResponse
	err := c.Do(ctx, http.MethodPost, clusterPrefix+"transfer-leader", TransferRequest{ID: id}, &out)
	return out, err
}

// HandOver moves leadership to another voter before this node stops, so
// that a planned restart costs no election gap: the followers would
// otherwise wait out their election timeout before one stands. It does
// nothing on a follower or on a cluster of one, and waits at most
// handOverWait; on failure the node stops anyway (as after a crash).
// Shutdown calls it; cmd/herald calls it earlier, before it stops the
// leader loops, so that the next leader's loops start while this node's
// wind down.
func (n *Node) HandOver() {
	if !n.IsLeader() || !n.hasOtherVoter() {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), n.handOverWait())
	defer cancel()
	n.log.Info("handing leadership over before shutting down")
	to, err := n.transferTo(ctx, "")
	if err != nil {
		n.log.Warn("leadership not handed over; stopping anyway (the followers elect a leader after their election timeout)",
			"err", err, "waited", time.Since(start).Round(time.Millisecond))
		return
	}
	n.log.Info("leadership handed over", "to", to, "took", time.Since(start).Round(time.Millisecond))
}

// hasOtherVoter reports whether a voter other than this node is configured.
func (n *Node) hasOtherVoter() bool {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) != n.cfg.NodeID && s.Suffrage == raft.Voter {
			return true
		}
	}
	return false
}

// transferTimedOut reports raft's error for a transfer whose target did
// not win within an election timeout: raft makes it with fmt.Errorf and
// exports no value for it, so its text is all there is to match.
func transferTimedOut(err error) bool {
	return strings.Contains(err.Error(), "leadership transfer timeout")
}

// transferTo moves leadership from this node (the leader) to voter id, or
// to the voter Raft picks when id is "", and waits until this node knows a
// new leader with a member record (so that writes can be forwarded to it).
// It returns the new leader's id.
func (n *Node) transferTo(ctx context.Context, id string) (string, error) {
	var addr raft.ServerAddress
	if id != "" {
		var err error
		if addr, err = n.voterAddr(id); err != nil {
			return "", err
		}
	}
	// raft gives a transfer one election timeout for the target to win;
	// a target slow to catch up (a loaded machine, a long log) misses it
	// while still healthy, so try again while ctx allows and this node
	// still leads.
	for {
		var f raft.Future
		if id == "" {
			f = n.raft.LeadershipTransfer()
		} else {
			f = n.raft.LeadershipTransferToServer(raft.ServerID(id), addr)
		}
		err := wait(ctx, f)
		if err == nil {
			break
		}
		if ctx.Err() != nil || !n.IsLeader() || !transferTimedOut(err) {
			return "", fmt.Errorf("leadership transfer: %w", mapRaftErr(err))
		}
		n.log.Info("leadership transfer timed out; trying again", "to", id)
	}
	var to string
	err := poll(ctx, n.shutdownCh, 10*time.Millisecond, func() bool {
		to = n.leaderID()
		return to != "" && to != n.cfg.NodeID && n.LeaderHTTPAddr() != ""
	})
	if err != nil {
		return "", fmt.Errorf("leadership transfer: no new leader known: %w", err)
	}
	if id != "" && to != id {
		return to, fmt.Errorf("%w: leadership went to %s, not %s (it was elected meanwhile)", ErrMemberConflict, to, id)
	}
	return to, nil
}

// voterAddr is the Raft address of voter id, or why it cannot lead.
func (n *Node) voterAddr(id string) (raft.ServerAddress, error) {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return "", mapRaftErr(err)
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) != id {
			continue
		}
		if s.Suffrage != raft.Voter {
			return "", fmt.Errorf("%w: %s is not a voter: only a voter can lead", ErrBadRequest, id)
		}
		return s.Address, nil
	}
	return "", fmt.Errorf("%w: %s", ErrUnknownMember, id)
}

// handleTransferLeader serves POST /v1/cluster/transfer-leader: the leader
// hands over to the member named (or to any voter), then asks the new
// leader, on behalf of the caller, to lead; the new leader already does,
// answers, and records the transfer in the audit trail: this node no
// longer leads and could not replicate the record itself. A transfer to
// the member that leads changes nothing and is answered (and recorded) at
// once.
func (n *Node) handleTransferLeader(w http.ResponseWriter, r *http.Request) {
	if !n.IsLeader() {
		n.forward(w, r)
		return
	}
	var req TransferRequest
	if !decodeOptional(w, r, &req) {
		return
	}
	if req.ID == n.cfg.NodeID {
		writeJSON(w, http.StatusOK, TransferResponse{Leader: n.cfg.NodeID})
		return
	}
	if !n.hasOtherVoter() {
		writeErr(w, fmt.Errorf("%w: %s is the only voter: there is no one to hand leadership to", ErrLastVoter, n.cfg.NodeID))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), n.handOverWait())
	defer cancel()
	to, err := n.transferTo(ctx, req.ID)
	if err != nil {
		writeErr(w, err)
		return
	}
	n.log.Info("leadership transferred on request", "to", to)
	// Recorded by the new leader, as the leader's own (Forwarded-To).
	out, err := n.clientForLeader(r).TransferLeader(r.Context(), to)
	if err != nil {
		writeErr(w, fmt.Errorf("leadership moved to %s, but it did not confirm: %w", to, err))
		return
	}
	w.Header().Set(ForwardedToHeader, to)
	writeJSON(w, http.StatusOK, out)
}

// decodeOptional is decode for a body that may be left out (curl -X POST).
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1))
	if err == nil && len(b) == 0 {
		return true
	}
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), r.Body))
	return decode(w, r, v)
}
