package cluster

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/engine/api/buffered"
)

// Node-to-node requests (join, and any other write one node makes on
// another's /v1/cluster/) and forwarded writes (vouch.go) prove that the
// sender holds the cluster secret without sending it: an HMAC-SHA256, keyed
// by the secret, over what the request is (method, path, body's SHA-256),
// when (a timestamp), a random nonce, and whom it is for: the cluster id and
// the receiving node's id. A proof is good once, at one node of one
// cluster: captured on plain HTTP, it cannot be replayed to another member
// (which has not seen its nonce), nor to another cluster that happens to
// share the secret. The answer carries an HMAC over the same nonce and its
// own body, so the sender knows the cluster holds the secret too before it
// trusts what it says.
const (
	// PeerAuthHeader carries a request's proof:
	// "v2 ts=UNIX nonce=HEX cluster=ID node=ID mac=HEX".
	PeerAuthHeader = "X-Herald-Cluster-Auth"
	// PeerReplyHeader carries the answer's HMAC (hex).
	PeerReplyHeader = "X-Herald-Cluster-Reply"
	// PeerNonceHeader carries the caller's nonce on a read whose answer
	// the member proves (peerReads): the answer's PeerReplyHeader covers it.
	PeerNonceHeader = "X-Herald-Cluster-Nonce"
	// PeerAuthWindow is how far a request's timestamp may be from the
	// receiver's clock. Replays inside it are caught by the nonce.
	PeerAuthWindow = 5 * time.Minute
	// MinSecretLen is the shortest cluster secret accepted: a guessable
	// secret proves nothing.
	MinSecretLen = 16
	// PeerAuthVersion is the proof format this build signs and checks. GET
	// /v1/cluster/status reports it (peer_auth), so that a sender signs in
	// the format its receiver reads: builds before it report none and check
	// only format 1, which names neither the cluster nor the node (see
	// "Rolling upgrades" in DESIGN.md).
	PeerAuthVersion = 2
	// legacyProof is the format of builds before PeerAuthVersion 2. This
	// build signs it for such a receiver only, and refuses it.
	legacyProof = 1
)

// ErrPeerAuth is wrapped by every refusal of a node-to-node request (HTTP
// 403): no proof of the secret, a wrong one, a stale or replayed one, or
// one made for another node or cluster.
var ErrPeerAuth = errors.New("cluster secret check failed")

// ErrSignedBeforeStart is wrapped, beside ErrPeerAuth, by the refusal of a
// proof signed before this node started (HTTP 503: a sender signs again
// and retries). The nonces a node has seen live in memory: after a
// restart it cannot tell a replay from a first delivery of an older
// proof, so it takes none signed before it started.
var ErrSignedBeforeStart = errors.New("signed before this node started")

// restartGrace is how much earlier than this node's start a proof may be
// signed: timestamps are whole seconds, and a sender's clock may lag a
// little. A proof captured before a restart and replayed after it is
// refused unless it was signed in the last restartGrace before the start.
const restartGrace = 2 * time.Second

// peerAuth signs and checks node-to-node requests. The zero secret (none
// configured) signs nothing and accepts only unsigned requests.
type peerAuth struct {
	secret  []byte
	nowFunc func() time.Time
	mu      sync.Mutex
	// started is when this node started: no proof signed (well) before it
	// is taken (ErrSignedBeforeStart). Under mu: tests move it back.
	started   time.Time
	seen      map[string]time.Time // nonce -> when it stops mattering
	nextPrune time.Time            // when remember next drops expired nonces
}

func newPeerAuth(secret string) *peerAuth {
	pa := &peerAuth{nowFunc: time.Now, started: time.Now(), seen: map[string]time.Time{}}
	if secret != "" {
		pa.secret = []byte(secret)
	}
	return pa
}

func (pa *peerAuth) enabled() bool { return len(pa.secret) > 0 }

func bodyDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// peerTarget is whom a proof is for: a node of a cluster, and the proof
// format that node's build reads (PeerAuthVersion, or legacyProof).
type peerTarget struct {
	node, cluster string
	version       int
}

// Kinds of signed statement: each is its own HMAC label, so that one can
// never stand for the other.
const (
	kindRequest = "cluster-request" // a node-to-node write (PeerAuthHeader)
	kindVouch   = "vouch"           // a forwarded write (VouchHeader)
)

// signedMsg is what a proof covers besides whom it is for and when.
type signedMsg struct {
	kind   string
	method string
	target string // the path (requests) or the request URI (vouches)
	body   []byte
	extra  []string // vouches: the caller and the forwarding node
}

// proof is a parsed PeerAuthHeader or VouchHeader.
type proof struct {
	version        int
	ts, nonce, mac string
	cluster, node  string // version 2 only
}

// mac is the one way a proof's HMAC is made, in the format of version.
func (pa *peerAuth) mac(m signedMsg, p proof) string {
	h := hmac.New(sha256.New, pa.secret)
	if p.version == legacyProof {
		fmt.Fprintf(h, "herald-%s-v1\n%s\n%s\n%s\n%s\n%s", m.kind, m.method, m.target, p.ts, p.nonce, bodyDigest(m.body))
	} else {
		fmt.Fprintf(h, "herald-%s-v2\n%s\n%s\n%s\n%s\n%s\n%s\n%s", m.kind, p.cluster, p.node, m.method, m.target, p.ts, p.nonce, bodyDigest(m.body))
	}
	for _, e := range m.extra {
		fmt.Fprintf(h, "\n%s", e)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// sign makes the proof of m for node to, in the format to's build reads:
// the header value and its nonce.
func (pa *peerAuth) sign(m signedMsg, to peerTarget) (header, nonce string, err error) {
	nonce, err = newNonce()
	if err != nil {
		return "", "", err
	}
	p := proof{version: PeerAuthVersion, ts: strconv.FormatInt(pa.nowFunc().Unix(), 10), nonce: nonce,
		cluster: to.cluster, node: to.node}
	if to.version == legacyProof {
		p.version = legacyProof
		return "v1 ts=" + p.ts + " nonce=" + p.nonce + " mac=" + pa.mac(m, p), p.nonce, nil
	}
	return "v2 ts=" + p.ts + " nonce=" + p.nonce + " cluster=" + p.cluster + " node=" + p.node + " mac=" + pa.mac(m, p), p.nonce, nil
}

// newNonce is a fresh random nonce (hex).
func newNonce() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// check verifies header as the proof of m received by self (this node's
// id and cluster id): whom it is for and the time (precheck), the HMAC,
// then the nonce. It returns the nonce (for the reply), or why it is
// refused.
func (pa *peerAuth) check(header string, m signedMsg, self peerTarget) (string, error) {
	p, err := pa.precheck(header, self)
	if err != nil {
		return "", err
	}
	if !hmac.Equal([]byte(p.mac), []byte(pa.mac(m, p))) {
		return "", fmt.Errorf("%w: the requesting node's cluster_secret differs from this cluster's", ErrPeerAuth)
	}
	if !pa.remember(p.nonce, pa.nowFunc()) {
		return "", fmt.Errorf("%w: this request was already received once (a replay)", ErrPeerAuth)
	}
	return p.nonce, nil
}

// precheck is what can be told of a proof from its header alone: its
// format, whom it is for and when it was signed. It comes before the body
// is read and hashed for the HMAC, so that a stranger's made-up header
// costs this node nothing more than reading it.
func (pa *peerAuth) precheck(header string, self peerTarget) (proof, error) {
	p, ok := parseProof(header)
	switch {
	case !ok:
		return proof{}, fmt.Errorf("%w: malformed proof header", ErrPeerAuth)
	case p.version == legacyProof:
		return proof{}, fmt.Errorf("%w: the sending node runs an older build, whose proof names neither the cluster nor the node it is for "+
			"(it could be replayed to another member): this build refuses it; upgrade the sending node", ErrPeerAuth)
	}
	if p.cluster != self.cluster {
		return proof{}, fmt.Errorf("%w: the request was made for cluster %s, and this node is in cluster %s "+
			"(two clusters that share a cluster_secret are still two clusters)", ErrPeerAuth, orNone(p.cluster), orNone(self.cluster))
	}
	if p.node != self.node {
		return proof{}, fmt.Errorf("%w: the request was made for node %s, and this is node %s (a proof is good at the node it was made for only)",
			ErrPeerAuth, p.node, self.node)
	}
	sec, _ := strconv.ParseInt(p.ts, 10, 64) // parseProof checked it
	now := pa.nowFunc()
	if skew := now.Sub(time.Unix(sec, 0)); skew > PeerAuthWindow || skew < -PeerAuthWindow {
		return proof{}, fmt.Errorf("%w: the request was signed at %s, %s away from this node's clock %s (allowed: %s): check both clocks",
			ErrPeerAuth, time.Unix(sec, 0).UTC().Format(time.RFC3339), skew.Round(time.Second), now.UTC().Format(time.RFC3339), PeerAuthWindow)
	}
	if signed, started := time.Unix(sec, 0), pa.startedAt(); signed.Before(started.Add(-restartGrace)) {
		return proof{}, fmt.Errorf("%w: %w: the proof was signed at %s and this node started at %s; it keeps the nonces it has seen in memory only, "+
			"so it takes no proof from before its start (it could be a replay): sign again",
			ErrPeerAuth, ErrSignedBeforeStart, signed.UTC().Format(time.RFC3339), started.UTC().Format(time.RFC3339))
	}
	return p, nil
}

func orNone(id string) string {
	if id == "" {
		return "(none yet)"
	}
	return id
}

func (pa *peerAuth) replyMAC(nonce string, status int, body []byte) string {
	m := hmac.New(sha256.New, pa.secret)
	fmt.Fprintf(m, "herald-cluster-reply-v1\n%s\n%d\n%s", nonce, status, bodyDigest(body))
	return hex.EncodeToString(m.Sum(nil))
}

// readReplyMAC is the HMAC of the answer to a proven read (peerReads): the
// caller's nonce, the path (so one read's answer cannot stand for
// another's), status and body, under its own label.
func (pa *peerAuth) readReplyMAC(path, nonce string, status int, body []byte) string {
	m := hmac.New(sha256.New, pa.secret)
	fmt.Fprintf(m, "herald-cluster-read-reply-v1\n%s\n%s\n%d\n%s", path, nonce, status, bodyDigest(body))
	return hex.EncodeToString(m.Sum(nil))
}

// checkReply verifies that an answer carries want, the HMAC only a node
// holding the same secret could make: the answer to a signed request
// (replyMAC) or to a proven read (readReplyMAC).
func (pa *peerAuth) checkReply(want string, resp *http.Response) error {
	if !pa.enabled() {
		return nil
	}
	got := resp.Header.Get(PeerReplyHeader)
	if got == "" {
		return fmt.Errorf("%w: the answering node did not prove it holds cluster_secret (it has none, or is not a Herald node of this cluster)", ErrPeerAuth)
	}
	if !hmac.Equal([]byte(got), []byte(want)) {
		return fmt.Errorf("%w: the answering node holds another cluster_secret", ErrPeerAuth)
	}
	return nil
}

// verify checks a node-to-node request's proof as received by self and
// returns its nonce (for the reply), or an error saying why it is refused.
// It reads the body (up to limit) and puts it back for the handler.
func (pa *peerAuth) verify(r *http.Request, limit int64, self peerTarget) (string, error) {
	header := r.Header.Get(PeerAuthHeader)
	if !pa.enabled() {
		if header != "" {
			return "", fmt.Errorf("%w: the requesting node has a cluster_secret but this node has none: give every node the same cluster_secret", ErrPeerAuth)
		}
		return "", nil
	}
	if header == "" {
		return "", fmt.Errorf("%w: this cluster requires cluster_secret and the request carries no proof of it: give the joining node the same cluster_secret as the members", ErrPeerAuth)
	}
	if _, err := pa.precheck(header, self); err != nil {
		return "", err // before the body: a made-up proof costs no read
	}
	if r.ContentLength > limit {
		return "", fmt.Errorf("%w: body over %d bytes", ErrBadRequest, limit)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return "", fmt.Errorf("%w: reading the body: %v", ErrBadRequest, err)
	}
	if int64(len(body)) > limit {
		return "", fmt.Errorf("%w: body over %d bytes", ErrBadRequest, limit)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return pa.check(header, requestMsg(r.Method, r.URL.Path, body), self)
}

// requestMsg is what a node-to-node request's proof covers.
func requestMsg(method, path string, body []byte) signedMsg {
	return signedMsg{kind: kindRequest, method: method, target: path, body: body}
}

func (pa *peerAuth) startedAt() time.Time {
	pa.mu.Lock()
	defer pa.mu.Unlock()
	return pa.started
}

// remember records a nonce; false if it was seen inside the window. Only
// requests with a valid MAC get here, so the map grows only with real
// requests. It is pruned as it is used, at most once a second: a leader
// keeps the nonce of every forwarded write for two windows, and scanning
// them all on every request made each one cost time in proportion to the
// write rate (3 ms at 100,000 nonces, under this lock).
func (pa *peerAuth) remember(nonce string, now time.Time) bool {
	pa.mu.Lock()
	defer pa.mu.Unlock()
	if !now.Before(pa.nextPrune) {
		for n, until := range pa.seen {
			if now.After(until) {
				delete(pa.seen, n)
			}
		}
		pa.nextPrune = now.Add(time.Second)
	}
	if until, ok := pa.seen[nonce]; ok && !now.After(until) {
		return false
	}
	// A timestamp may be up to a window ahead: keep the nonce two windows.
	pa.seen[nonce] = now.Add(2 * PeerAuthWindow)
	return true
}

// parseProof reads "v1 ts= nonce= mac=" (older builds) or "v2 ts= nonce=
// cluster= node= mac=". Only the cluster may be empty (a cluster from
// before cluster ids, or a node that has not learnt its id yet).
func parseProof(h string) (proof, bool) {
	fields := strings.Fields(h)
	if len(fields) == 0 {
		return proof{}, false
	}
	var p proof
	want := map[string]*string{"ts": &p.ts, "nonce": &p.nonce, "mac": &p.mac}
	switch fields[0] {
	case "v1":
		p.version = legacyProof
	case "v2":
		p.version = 2
		want["cluster"], want["node"] = &p.cluster, &p.node
	default:
		return proof{}, false
	}
	if len(fields)-1 != len(want) {
		return proof{}, false
	}
	for _, f := range fields[1:] {
		k, v, found := strings.Cut(f, "=")
		dst, known := want[k]
		if !found || !known || len(v) > 64 || (v == "" && k != "cluster") {
			return proof{}, false
		}
		delete(want, k) // each key once
		*dst = v
	}
	if _, err := strconv.ParseInt(p.ts, 10, 64); err != nil || len(p.mac) > 64 {
		return proof{}, false
	}
	return p, true
}

// signedReply holds the answer to a verified request or a proven read
// (cluster answers are small) so that it goes out with mac, the reply HMAC
// over its status and body.
type signedReply struct {
	buffered.Writer
	mac func(status int, body []byte) string
}

// flush sends the buffered answer with its HMAC.
func (s *signedReply) flush() {
	s.Header().Set(PeerReplyHeader, s.mac(s.Status(), s.Body()))
	s.Send()
}

// PeerSigned reports whether r is a node-to-node write that this node
// authenticates by the cluster secret itself (a join carrying a proof,
// with a secret configured). The API's auth middleware lets such a request
// past its loopback rule; the handler then refuses a wrong proof with 403.
func (n *Node) PeerSigned(r *http.Request) bool {
	return n.peer.enabled() && r.Method == http.MethodPost && peerEndpoints[r.URL.Path] && r.Header.Get(PeerAuthHeader) != ""
}

// self is whom a proof received here must have been made for.
func (n *Node) self() peerTarget {
	return peerTarget{node: n.cfg.NodeID, cluster: n.ClusterID(), version: PeerAuthVersion}
}

// leaderTarget is what a follower learnt of a leader to sign its forwards:
// valid for one leader at one address in one term (a leader's build
// changes only with a restart, and so a new term).
type leaderTarget struct {
	id, addr string
	term     uint64
	to       peerTarget
}

// targetForLeader is whom a write this node forwards to leader id at addr
// is signed for. The leader's proof format is asked once per term (GET
// /v1/cluster/status): during a rolling upgrade an older leader reads only
// the older format. If it does not answer, the forward is signed in this
// build's format, and asked again next time. Without a secret nothing is
// signed, and nothing asked.
func (n *Node) targetForLeader(ctx context.Context, id, addr string) peerTarget {
	if !n.peer.enabled() {
		return peerTarget{}
	}
	term := n.raft.CurrentTerm()
	n.leaderMu.Lock()
	c := n.leaderFor
	n.leaderMu.Unlock()
	if c.id == id && c.addr == addr && c.term == term {
		return c.to
	}
	to := peerTarget{node: id, cluster: n.ClusterID(), version: PeerAuthVersion}
	if st, ok := n.statusOf(ctx, addr); ok && st.NodeID == id {
		to = targetOf(st, n.ClusterID())
		n.leaderMu.Lock()
		n.leaderFor = leaderTarget{id: id, addr: addr, term: term, to: to}
		n.leaderMu.Unlock()
	}
	return to
}
