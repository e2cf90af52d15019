package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/heraldhq/herald/engine"
)

// Removed means removed. A member an operator removed (remove, or leave)
// still holds the cluster secret, maybe a token, and a certificate the CA
// signed. Its id is recorded as removed in the replicated state
// (engine.CmdRevokeMember) before it leaves the Raft configuration, so
// every member refuses it: the leader its join (403), and every member its
// Raft connections (the certificate's common name is the id: raftpeers.go),
// until an admin readmits it (POST /v1/cluster/readmit, herald cluster
// readmit ID; engine.CmdReadmitMember). Moves and dead predecessors that
// addMember replaces are not removals by anyone and revoke nothing.

// ErrRemovedMember is wrapped by the refusal of a removed member's join
// (HTTP 403).
var ErrRemovedMember = errors.New("removed member")

// readmitPath is the endpoint that readmits a removed member.
const readmitPath = clusterPrefix + "readmit"

// ReadmitRequest is the body of POST /v1/cluster/readmit.
type ReadmitRequest struct {
	ID string `json:"id"`
}

// refuseRemoved is the refusal of removed member id's join, or nil.
func (n *Node) refuseRemoved(id string) error {
	r, ok := n.sm.RemovedMember(id)
	if !ok {
		return nil
	}
	by := ""
	if r.By != "" {
		by = " by " + r.By
	}
	return fmt.Errorf("%w: %s was removed from this cluster at %s%s; it joins again only once an admin readmits it: herald cluster readmit %s",
		ErrRemovedMember, id, r.At.UTC().Format(time.RFC3339), by, id)
}

// revoke records id as removed, on the leader, by the caller of r. While
// a member's build cannot apply the record (a rolling upgrade), the
// removal goes on without it, as before, and says so in the log.
func (n *Node) revoke(ctx context.Context, r *http.Request, id string) error {
	if _, ok := n.sm.RemovedMember(id); ok {
		return nil
	}
	cmd, err := engine.Encode(engine.CmdRevokeMember, engine.RevokeMember{ID: id, At: time.Now().UTC(), By: callerActor(r)})
	if err != nil {
		return err
	}
	if _, err := n.Apply(ctx, cmd); err != nil {
		if errors.Is(err, engine.ErrMembersBehind) {
			n.log.Warn("removing a member without recording it as removed: a member runs an older build; it could join again until every member is upgraded",
				"id", id, "err", err)
			return nil
		}
		return err
	}
	return nil
}

// callerActor is the actor engine/api named in r's CallerHeader ("" when
// none): who removed a member, for its record (the audit trail has the
// rest).
func callerActor(r *http.Request) string {
	v, err := url.ParseQuery(r.Header.Get(CallerHeader))
	if err != nil {
		return ""
	}
	return v.Get("actor")
}

// handleReadmit lets a removed member join again (on the leader).
func (n *Node) handleReadmit(w http.ResponseWriter, r *http.Request) {
	if !n.IsLeader() {
		n.forward(w, r)
		return
	}
	var req ReadmitRequest
	if !decode(w, r, &req) {
		return
	}
	if _, ok := n.sm.RemovedMember(req.ID); !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("%s is not a removed member of this cluster: nothing to readmit", req.ID))
		return
	}
	cmd, err := engine.Encode(engine.CmdReadmitMember, engine.ReadmitMember{ID: req.ID, At: time.Now().UTC(), By: callerActor(r)})
	if err != nil {
		writeErr(w, err)
		return
	}
	if _, err := n.Apply(r.Context(), cmd); err != nil {
		writeErr(w, err)
		return
	}
	n.log.Info("readmitted a removed member", "id", req.ID)
	writeJSON(w, http.StatusOK, map[string]string{"readmitted": req.ID})
}

// Readmit lets removed member id join again, through the node at Addr.
func (c *Client) Readmit(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodPost, readmitPath, ReadmitRequest{ID: id}, nil)
}
