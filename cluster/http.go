package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api/buffered"
	"github.com/heraldhq/herald/engine/api/reply"
)

// HopHeader marks a request already forwarded once by a follower. A node
// that receives it and does not lead answers 503 instead of forwarding
// again, so two nodes with stale views of the leader cannot bounce a write
// between them.
const HopHeader = "X-Herald-Forwarded-By"

// clusterPrefix is where Handler is mounted. ForwardWrites lets these paths
// through: Handler forwards its own writes, and leave must act on the node
// that received it, not on the leader.
const clusterPrefix = "/v1/cluster/"

// Handler serves the cluster API. Mount it at /v1/cluster/ without
// stripping the prefix:
//
//	POST /v1/cluster/join   {id, raft_addr, http_addr, non_voter?}  add a voter or non-voter (forwarded to the leader)
//	POST /v1/cluster/leave                              this node leaves the cluster
//	POST /v1/cluster/remove {id}                        remove a member (forwarded to the leader)
//	POST /v1/cluster/readmit {id}                       let a removed member join again (forwarded to the leader)
//	POST /v1/cluster/promote {id}                       make a non-voter a voter (forwarded to the leader)
//	POST /v1/cluster/transfer-leader {id?}              hand leadership to id, or to any voter (forwarded to the leader)
//	GET  /v1/cluster/status                             this node's view of the cluster
//	GET  /v1/cluster/report                             this member's report of itself (memberreport.go)
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+clusterPrefix+"status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, n.Status())
	})
	mux.HandleFunc("GET "+reportPath, n.provenRead(n.handleReport))
	mux.HandleFunc("POST "+clusterPrefix+"join", n.peerOnly(n.handleJoin))
	mux.HandleFunc("POST "+clusterPrefix+"remove", n.handleRemove)
	mux.HandleFunc("POST "+readmitPath, n.handleReadmit)
	mux.HandleFunc("POST "+promotePath, n.handlePromote)
	mux.HandleFunc("POST "+clusterPrefix+"leave", n.handleLeave)
	mux.HandleFunc("POST "+clusterPrefix+"transfer-leader", n.handleTransferLeader)
	mux.HandleFunc(clusterPrefix, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no cluster endpoint %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// peerOnly guards a node-to-node write: with a cluster secret, only a
// request that proves it gets through, and the answer proves it back; with
// none, a request claiming one is refused (the nodes are misconfigured).
func (n *Node) peerOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		nonce, err := n.peer.verify(r, 1<<20, n.self())
		if err != nil {
			// The reason goes back to the requesting node; the log says who
			// tried. Neither holds the secret or the proof.
			n.refuse(refusedPeerRequest, "refused a node-to-node request", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
			writeErr(w, err)
			return
		}
		if !n.peer.enabled() {
			h(w, r)
			return
		}
		sr := &signedReply{Writer: buffered.Writer{ResponseWriter: w}, mac: func(status int, body []byte) string {
			return n.peer.replyMAC(nonce, status, body)
		}}
		h(sr, r)
		sr.flush()
	}
}

func (n *Node) handleJoin(w http.ResponseWriter, r *http.Request) {
	if !n.IsLeader() {
		n.forward(w, r)
		return
	}
	var req JoinRequest
	if !decode(w, r, &req) {
		return
	}
	if err := n.addMember(r.Context(), req); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, JoinResponse{ID: req.ID, LeaderID: n.cfg.NodeID, ClusterID: n.ClusterID()})
}

func (n *Node) handleRemove(w http.ResponseWriter, r *http.Request) {
	if !n.IsLeader() {
		n.forward(w, r)
		return
	}
	var req RemoveRequest
	if !decode(w, r, &req) {
		return
	}
	if req.ID == n.cfg.NodeID {
		// The leader cannot commit its own removal and then record it: hand
		// leadership over and let the new leader do both.
		if err := n.transferLeadership(r.Context()); err != nil {
			writeErr(w, err)
			return
		}
		if err := n.clientForLeader(r).Remove(r.Context(), req.ID); err != nil {
			writeErr(w, err)
			return
		}
		w.Header().Set(ForwardedToHeader, n.leaderID())
		writeJSON(w, http.StatusOK, map[string]string{"removed": req.ID})
		return
	}
	if err := n.removeMember(r.Context(), r, req.ID); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"removed": req.ID})
}

// handleLeave removes this node: a follower asks the leader to remove it; a
// leader first transfers leadership, then asks the new leader.
func (n *Node) handleLeave(w http.ResponseWriter, r *http.Request) {
	if err := n.leave(r.Context(), r); err != nil {
		writeErr(w, err)
		return
	}
	// The leader removed this node, and recorded it.
	w.Header().Set(ForwardedToHeader, n.leaderID())
	writeJSON(w, http.StatusOK, map[string]string{"removed": n.cfg.NodeID})
}

// leave asks the leader to remove this node on behalf of the caller of r
// (its token, and the caller this node vouches for): the leader checks
// (and audits) the caller, not this node.
func (n *Node) leave(ctx context.Context, r *http.Request) error {
	if n.IsLeader() {
		if err := n.transferLeadership(ctx); err != nil {
			return err
		}
	}
	if n.LeaderHTTPAddr() == "" {
		return ErrNoLeader
	}
	if err := n.clientForLeader(r).Remove(ctx, n.cfg.NodeID); err != nil {
		return err
	}
	n.log.Info("left the cluster; stop this agent (or join it again)")
	return nil
}

// clientForLeader calls the leader on behalf of the caller of r, with the
// caller's token (never this node's own), vouching for the caller.
func (n *Node) clientForLeader(r *http.Request) *Client {
	_, leader := n.raft.LeaderWithID()
	addr := n.memberHTTP(string(leader))
	c := n.clientFor(addr)
	to := n.targetForLeader(r.Context(), string(leader), addr)
	c.to = &to
	c.Token = callerToken(r)
	c.OnBehalf, c.Via = r.Header.Get(CallerHeader), n.cfg.NodeID
	return c
}

// callerToken is the bearer token r came with, "" for none.
func callerToken(r *http.Request) string {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// ForwardWrites wraps next so that, on a follower, requests that change
// state (anything but GET, HEAD and OPTIONS) are reverse-proxied to the
// leader's HTTP address. Reads are served locally. With no known leader it
// answers 503 with a reason. Cluster endpoints pass through: Handler
// forwards those itself.
func (n *Node) ForwardWrites(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet, r.Method == http.MethodHead, r.Method == http.MethodOptions,
			strings.HasPrefix(r.URL.Path, clusterPrefix), n.IsLeader():
			next.ServeHTTP(w, r)
		default:
			n.forward(w, r)
		}
	})
}

// forward proxies r to the leader, or answers 503 when that is impossible.
func (n *Node) forward(w http.ResponseWriter, r *http.Request) {
	if by := r.Header.Get(HopHeader); by != "" {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf(
			"not the leader, and the request was already forwarded once (by %s): the cluster is changing leaders, retry", by))
		return
	}
	_, leaderID := n.raft.LeaderWithID()
	if leaderID == "" {
		writeError(w, http.StatusServiceUnavailable, "no leader elected: the cluster has no quorum or is electing one, retry")
		return
	}
	addr := n.memberHTTP(string(leaderID))
	if addr == "" {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("leader %s has not recorded its HTTP address yet, retry", leaderID))
		return
	}
	target, err := url.Parse(baseURLScheme(addr, n.cfg.HTTPScheme))
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Sprintf("leader %s has a bad HTTP address %q", leaderID, addr))
		return
	}
	// Vouch for the caller (with the cluster secret). A node-to-node write
	// (a join) was checked here against a proof made for this node
	// (peerOnly): it is signed again, for the leader. Nothing else is:
	// this node signs only what it checked. Proofs are made for one node,
	// so a client's or a member's own never goes on.
	to := n.targetForLeader(r.Context(), string(leaderID), addr)
	vouch := n.peer.vouch(r, n.cfg.NodeID, to)
	var proof string
	if n.PeerSigned(r) {
		if body, ok := peekBody(r); ok {
			proof, _, _ = n.peer.sign(requestMsg(r.Method, r.URL.Path, body), to)
		}
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// No X-Forwarded-For: without tokens the leader refuses a write
			// a proxy passed on (engine/api local.go), and this forward
			// says who its client was in the voucher instead.
			pr.Out.Header.Set(HopHeader, n.cfg.NodeID)
			pr.Out.Header.Del(VouchHeader)
			pr.Out.Header.Del(PeerAuthHeader)
			if vouch != "" {
				pr.Out.Header.Set(VouchHeader, vouch)
			}
			if proof != "" {
				pr.Out.Header.Set(PeerAuthHeader, proof)
			}
		},
		// Say who answered only when the leader did: it performed the
		// write and recorded it (a leader that handed the write on names
		// the one that did). A forward that fails (502 below) performed
		// nothing, and this node's API must not take it for a write done
		// elsewhere.
		ModifyResponse: func(resp *http.Response) error {
			if resp.Header.Get(ForwardedToHeader) == "" {
				resp.Header.Set(ForwardedToHeader, string(leaderID))
			}
			return nil
		},
		Transport: n.client.Transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, http.StatusBadGateway, fmt.Sprintf("forwarding to leader %s at %s: %v", leaderID, addr, err))
		},
	}
	if r.URL.Path == SnapshotPath {
		// A backup being restored may take longer to pass on than the
		// server's ReadTimeout.
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	}
	proxy.ServeHTTP(w, r)
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("bad JSON body: %v", err))
		return false
	}
	return true
}

// writeErr maps an error to a status: the caller's mistakes are 4xx, the
// cluster's transient states 503.
func writeErr(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var ae *APIError
	switch {
	case errors.Is(err, ErrBadRequest):
		status = http.StatusBadRequest
	case errors.Is(err, ErrSignedBeforeStart):
		status = http.StatusServiceUnavailable // the sender signs again
	case errors.Is(err, ErrPeerAuth), errors.Is(err, ErrRemovedMember):
		status = http.StatusForbidden
	case errors.Is(err, ErrUnknownMember):
		status = http.StatusNotFound
	case errors.Is(err, ErrLastVoter), errors.Is(err, ErrMemberConflict), errors.Is(err, ErrForeignCluster),
		errors.Is(err, ErrQuorumAtRisk):
		status = http.StatusConflict
	case errors.Is(err, ErrRaftUnreachable):
		status = http.StatusBadGateway
	case errors.Is(err, engine.ErrNotLeader), errors.Is(err, ErrNoLeader), errors.Is(err, ErrShutdown):
		status = http.StatusServiceUnavailable
	case errors.As(err, &ae):
		status = ae.Status
		err = errors.New(ae.Message)
	}
	writeError(w, status, err.Error())
}

// writeError answers with the error envelope the API's endpoints also
// fail with (reply.Error), so a client reads every Herald error alike.
// The cluster's answers stay compact even under the API's ?pretty=1, as
// they always were.
func writeError(w http.ResponseWriter, status int, reason string) {
	reply.Error(w, status, reason, false)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	reply.JSON(w, status, v, false)
}
