package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"

	"github.com/heraldhq/herald/engine/api/reply"
)

// Client talks to any node's /v1/cluster/ endpoints. The CLI uses it, and so
// does a joining node.
type Client struct {
	// Addr is the node's HTTP address: host:port, or a URL with a scheme.
	Addr string
	// HTTP is the client used; nil means http.DefaultClient.
	HTTP *http.Client
	// Token, when set, is sent as "Authorization: Bearer TOKEN".
	Token string
	// PeerReads makes this a node's own client: its GETs carry ReadToken
	// (no stronger than read) instead of Token, and, with Secret, the node
	// read credential (peerread.go).
	PeerReads bool
	// ReadToken is the token a node's reads carry (PeerReads).
	ReadToken string
	// Scheme is used when Addr has none: "http" (default) or "https".
	Scheme string
	// Secret is the cluster secret. When set, node-to-node writes (join,
	// announce) carry an HMAC proving it, and their answers must prove it
	// too; see PeerAuthHeader.
	Secret string
	// OnBehalf, with Secret, makes the request a forward by node Via that
	// vouches for this caller (engine/api's encoding; see VouchHeader).
	OnBehalf, Via string
	// ClusterID is the cluster the caller belongs to, if it knows: signed
	// requests are made for it. Empty (a node's first join, the CLI): for
	// the cluster the node at Addr reports.
	ClusterID string
	// to is whom signed requests are for, when the caller knows (a node
	// calling its leader); nil: Do asks the node at Addr (GET
	// /v1/cluster/status) for its id and proof format first.
	to *peerTarget
	// MaxResponse bounds the answer read into memory; a longer one is an
	// error. Zero means DefaultMaxResponse, enough for the node-to-node
	// calls; the CLI, which reads lists, sets more.
	MaxResponse int64
}

// DefaultMaxResponse is Client.MaxResponse when unset: a member's status or
// join answer is a few KB, and a node must not hold what a hostile or
// broken peer sends without end.
const DefaultMaxResponse = 1 << 20

// peerEndpoints are the node-to-node writes: signed when a secret is set.
var peerEndpoints = map[string]bool{
	clusterPrefix + "join": true,
}

// peerReads are the node-to-node reads whose answer, with a secret, the
// member proves: the caller sends a fresh nonce (PeerNonceHeader) and the
// answer carries an HMAC over it (readReplyMAC). The request itself carries
// no proof: it changes nothing, and a proof's timestamp would be refused
// by a member whose clock is off by more than PeerAuthWindow, the very
// member whose report must get through.
var peerReads = map[string]bool{
	reportPath: true,
}

// JoinRequest is the body of POST /v1/cluster/join.
type JoinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	// ClusterID is the cluster a node with state belongs to; the leader
	// refuses it if it is another cluster's. Empty for a new node.
	ClusterID string `json:"cluster_id,omitempty"`
	// NonVoter adds a new member as a non-voter (raft AddNonvoter). It
	// never changes the suffrage of a member already in the
	// configuration: promote does that.
	NonVoter bool `json:"non_voter,omitempty"`
}

// JoinResponse is the answer to POST /v1/cluster/join.
type JoinResponse struct {
	ID        string `json:"id"`
	LeaderID  string `json:"leader_id"`
	ClusterID string `json:"cluster_id,omitempty"`
}

// RemoveRequest is the body of POST /v1/cluster/remove.
type RemoveRequest struct {
	ID string `json:"id"`
}

// UnreachableError means nothing answered at a node's HTTP address.
type UnreachableError struct {
	Addr string
	Err  error
}

func (e *UnreachableError) Error() string {
	reason := e.Err.Error()
	if errors.Is(e.Err, syscall.ECONNREFUSED) {
		reason = "connection refused"
	}
	return fmt.Sprintf("no Herald node at %s: %s", e.Addr, reason)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// APIError is a non-2xx answer from a node, with its {"error": ...} reason.
type APIError struct {
	Addr    string
	Status  int
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s: %s (HTTP %d)", e.Addr, e.Message, e.Status)
}

// retryable reports whether a join attempt is worth repeating: nothing
// listening yet, or the cluster is between leaders.
func retryable(err error) bool {
	var ue *UnreachableError
	var ae *APIError
	switch {
	case errors.As(err, &ue):
		return true
	case errors.As(err, &ae):
		return ae.Status >= 500
	}
	return false
}

// baseURLScheme turns host:port into scheme://host:port (http when scheme
// is empty); a URL is kept as is.
func baseURLScheme(addr, scheme string) string {
	if strings.Contains(addr, "://") {
		return strings.TrimSuffix(addr, "/")
	}
	if scheme == "" {
		scheme = "http"
	}
	return scheme + "://" + addr
}

// target is whom a signed request to Addr is for: c.to, or what the node
// at Addr says it is. A build that reports no peer_auth reads only the
// proof format of builds before PeerAuthVersion 2 (a rolling upgrade).
func (c *Client) target(ctx context.Context) (peerTarget, error) {
	if c.to != nil {
		return *c.to, nil
	}
	// Asked with the write's own token, which the write then takes to the
	// same node anyway (an older member knows no node read credential).
	ask := *c
	ask.PeerReads = false
	st, err := ask.Status(ctx)
	if err != nil {
		return peerTarget{}, err
	}
	return targetOf(st, c.ClusterID), nil
}

// targetOf is whom to sign for at the node that answered st: cluster is
// the caller's own cluster id when it has one, else the node's.
func targetOf(st Status, cluster string) peerTarget {
	if cluster == "" {
		cluster = st.ClusterID
	}
	return peerTarget{node: st.NodeID, cluster: cluster, version: min(max(st.PeerAuth, legacyProof), PeerAuthVersion)}
}

// Status fetches the node's view of the cluster.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.Do(ctx, http.MethodGet, "/v1/cluster/status", nil, &st)
	return st, err
}

// Join adds a member through the node at Addr (forwarded to the leader).
func (c *Client) Join(ctx context.Context, req JoinRequest) error {
	return c.Do(ctx, http.MethodPost, "/v1/cluster/join", req, nil)
}

// Leave makes the node at Addr leave the cluster.
func (c *Client) Leave(ctx context.Context) error {
	return c.Do(ctx, http.MethodPost, "/v1/cluster/leave", struct{}{}, nil)
}

// Remove removes member id through the node at Addr.
func (c *Client) Remove(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodPost, "/v1/cluster/remove", RemoveRequest{ID: id}, nil)
}

// Do sends in (as JSON, when not nil) to path on the node at Addr and
// decodes the answer into out (when not nil). Other commands that talk to a
// node's API use it too, so every CLI reports an unreachable node or an
// API error the same way.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var (
		body io.Reader
		raw  []byte
	)
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, raw = bytes.NewReader(b), b
	}
	req, err := http.NewRequestWithContext(ctx, method, baseURLScheme(c.Addr, c.Scheme)+path, body)
	if err != nil {
		return fmt.Errorf("node address %q: %w", c.Addr, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	token := c.Token
	if c.PeerReads && method == http.MethodGet {
		token = c.ReadToken
		if v := nodeRead(c.Secret, method, path); v != "" {
			req.Header.Set(NodeReadHeader, v)
		}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	var (
		pa    *peerAuth
		nonce string
		to    peerTarget
	)
	peerWrite := c.Secret != "" && method == http.MethodPost && peerEndpoints[path]
	peerRead := c.Secret != "" && method == http.MethodGet && peerReads[path]
	if c.Secret != "" && (c.OnBehalf != "" || peerWrite) {
		if to, err = c.target(ctx); err != nil {
			return err
		}
	}
	if c.OnBehalf != "" {
		req.Header.Set(HopHeader, c.Via)
		req.Header.Set(CallerHeader, c.OnBehalf)
		if v := newPeerAuth(c.Secret).vouch(req, c.Via, to); v != "" {
			req.Header.Set(VouchHeader, v)
		}
	}
	if peerWrite {
		pa = newPeerAuth(c.Secret)
		var header string
		if header, nonce, err = pa.sign(requestMsg(method, path, raw), to); err != nil {
			return err
		}
		req.Header.Set(PeerAuthHeader, header)
	}
	if peerRead {
		pa = newPeerAuth(c.Secret)
		if nonce, err = newNonce(); err != nil {
			return err
		}
		req.Header.Set(PeerNonceHeader, nonce)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &UnreachableError{Addr: c.Addr, Err: err}
	}
	defer resp.Body.Close()
	limit := c.MaxResponse
	if limit <= 0 {
		limit = DefaultMaxResponse
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return &UnreachableError{Addr: c.Addr, Err: err}
	}
	if int64(len(b)) > limit {
		return fmt.Errorf("%s: the answer is over %d bytes (HTTP %d): not read", c.Addr, limit, resp.StatusCode)
	}
	if pa != nil && resp.StatusCode/100 == 2 {
		// Success counts only from a node that holds the secret: a node
		// must not join a cluster that cannot prove it. Refusals are
		// reported as they are (nothing is done on them).
		want := pa.replyMAC(nonce, resp.StatusCode, b)
		if peerRead {
			want = pa.readReplyMAC(path, nonce, resp.StatusCode, b)
		}
		if err := pa.checkReply(want, resp); err != nil {
			return fmt.Errorf("%s: %w", c.Addr, err)
		}
	}
	if resp.StatusCode/100 != 2 {
		return c.apiError(resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s: bad response: %w", c.Addr, err)
		}
	}
	return nil
}

// apiError is the APIError of a non-2xx answer with body b.
func (c *Client) apiError(status int, b []byte) *APIError {
	var e reply.Body
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = strings.TrimSpace(string(b))
	}
	if e.Error == "" {
		e.Error = http.StatusText(status)
	}
	if status == http.StatusBadRequest && strings.Contains(e.Error, "HTTP request to an HTTPS server") {
		e.Error += " Use https://" + strings.TrimPrefix(c.Addr, "http://") + ", or give the CA with --ca (HERALD_CA)."
	}
	return &APIError{Addr: c.Addr, Status: status, Message: e.Error}
}
