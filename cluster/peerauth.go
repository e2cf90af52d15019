package cluster

import (
	"bytes"
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
)

// Node-to-node requests (join, and any other write one node makes on
// another's /v1/cluster/) prove that the sender holds the cluster secret
// without sending it: an HMAC-SHA256, keyed by the secret, over the method,
// path, a timestamp, a random nonce and the body's SHA-256. The answer
// carries an HMAC over the same nonce and its own body, so the sender
// knows the cluster holds the secret too before it trusts what it says.
const (
	// PeerAuthHeader carries "v1 ts=UNIX nonce=HEX mac=HEX" on a request.
	PeerAuthHeader = "X-Herald-Cluster-Auth"
	// PeerReplyHeader carries the answer's HMAC (hex).
	PeerReplyHeader = "X-Herald-Cluster-Reply"
	// PeerAuthWindow is how far a request's timestamp may be from the
	// receiver's clock. Replays inside it are caught by the nonce.
	PeerAuthWindow = 5 * time.Minute
	// MinSecretLen is the shortest cluster secret accepted: a guessable
	// secret proves nothing.
	MinSecretLen = 16
)

// ErrPeerAuth is wrapped by every refusal of a node-to-node request (HTTP
// 403): no proof of the secret, a wrong one, or a stale or replayed one.
var ErrPeerAuth = errors.New("cluster secret check failed")

// peerAuth signs and checks node-to-node requests. The zero secret (none
// configured) signs nothing and accepts only unsigned requests.
type peerAuth struct {
	secret  []byte
	nowFunc func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // nonce -> when it stops mattering
}

func newPeerAuth(secret string) *peerAuth {
	pa := &peerAuth{nowFunc: time.Now, seen: map[string]time.Time{}}
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

func (pa *peerAuth) requestMAC(method, path, ts, nonce string, body []byte) string {
	m := hmac.New(sha256.New, pa.secret)
	fmt.Fprintf(m, "herald-cluster-request-v1\n%s\n%s\n%s\n%s\n%s", method, path, ts, nonce, bodyDigest(body))
	return hex.EncodeToString(m.Sum(nil))
}

func (pa *peerAuth) replyMAC(nonce string, status int, body []byte) string {
	m := hmac.New(sha256.New, pa.secret)
	fmt.Fprintf(m, "herald-cluster-reply-v1\n%s\n%d\n%s", nonce, status, bodyDigest(body))
	return hex.EncodeToString(m.Sum(nil))
}

// sign sets the request's auth header and returns its nonce ("" when no
// secret is configured).
func (pa *peerAuth) sign(req *http.Request, body []byte) (string, error) {
	if !pa.enabled() {
		return "", nil
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	nonce := hex.EncodeToString(b)
	ts := strconv.FormatInt(pa.nowFunc().Unix(), 10)
	mac := pa.requestMAC(req.Method, req.URL.Path, ts, nonce, body)
	req.Header.Set(PeerAuthHeader, "v1 ts="+ts+" nonce="+nonce+" mac="+mac)
	return nonce, nil
}

// checkReply verifies that an answer to a signed request comes from a node
// holding the same secret.
func (pa *peerAuth) checkReply(nonce string, resp *http.Response, body []byte) error {
	if !pa.enabled() {
		return nil
	}
	got := resp.Header.Get(PeerReplyHeader)
	if got == "" {
		return fmt.Errorf("%w: the answering node did not prove it holds cluster_secret (it has none, or is not a Herald node of this cluster)", ErrPeerAuth)
	}
	if !hmac.Equal([]byte(got), []byte(pa.replyMAC(nonce, resp.StatusCode, body))) {
		return fmt.Errorf("%w: the answering node holds another cluster_secret", ErrPeerAuth)
	}
	return nil
}

// verify checks a request's proof and returns its nonce (for the reply),
// or an error saying why it is refused. It reads the body (up to limit)
// and puts it back for the handler.
func (pa *peerAuth) verify(r *http.Request, limit int64) (string, error) {
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
	ts, nonce, mac, ok := parseAuthHeader(header)
	if !ok {
		return "", fmt.Errorf("%w: malformed %s header", ErrPeerAuth, PeerAuthHeader)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return "", fmt.Errorf("%w: reading the body: %v", ErrBadRequest, err)
	}
	if int64(len(body)) > limit {
		return "", fmt.Errorf("%w: body over %d bytes", ErrBadRequest, limit)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !hmac.Equal([]byte(mac), []byte(pa.requestMAC(r.Method, r.URL.Path, ts, nonce, body))) {
		return "", fmt.Errorf("%w: the requesting node's cluster_secret differs from this cluster's", ErrPeerAuth)
	}
	sec, _ := strconv.ParseInt(ts, 10, 64) // parseAuthHeader checked it
	now := pa.nowFunc()
	if skew := now.Sub(time.Unix(sec, 0)); skew > PeerAuthWindow || skew < -PeerAuthWindow {
		return "", fmt.Errorf("%w: the request was signed at %s, %s away from this node's clock %s (allowed: %s): check both clocks",
			ErrPeerAuth, time.Unix(sec, 0).UTC().Format(time.RFC3339), skew.Round(time.Second), now.UTC().Format(time.RFC3339), PeerAuthWindow)
	}
	if !pa.remember(nonce, now) {
		return "", fmt.Errorf("%w: this request was already received once (a replay)", ErrPeerAuth)
	}
	return nonce, nil
}

// remember records a nonce; false if it was seen inside the window. Only
// requests with a valid MAC get here, so the map grows only with real
// requests, and it is pruned as it is used.
func (pa *peerAuth) remember(nonce string, now time.Time) bool {
	pa.mu.Lock()
	defer pa.mu.Unlock()
	for n, until := range pa.seen {
		if now.After(until) {
			delete(pa.seen, n)
		}
	}
	if _, ok := pa.seen[nonce]; ok {
		return false
	}
	// A timestamp may be up to a window ahead: keep the nonce two windows.
	pa.seen[nonce] = now.Add(2 * PeerAuthWindow)
	return true
}

func parseAuthHeader(h string) (ts, nonce, mac string, ok bool) {
	fields := strings.Fields(h)
	if len(fields) != 4 || fields[0] != "v1" {
		return "", "", "", false
	}
	for _, f := range fields[1:] {
		k, v, found := strings.Cut(f, "=")
		if !found || v == "" {
			return "", "", "", false
		}
		switch k {
		case "ts":
			ts = v
		case "nonce":
			nonce = v
		case "mac":
			mac = v
		default:
			return "", "", "", false
		}
	}
	if _, err := strconv.ParseInt(ts, 10, 64); err != nil || nonce == "" || mac == "" || len(nonce) > 64 {
		return "", "", "", false
	}
	return ts, nonce, mac, true
}

// signedReply wraps a ResponseWriter so that the answer to a verified
// request carries the reply HMAC: the body is buffered (cluster answers are
// small) and the header set before anything is written.
type signedReply struct {
	http.ResponseWriter
	pa     *peerAuth
	nonce  string
	status int
	buf    bytes.Buffer
}

func (s *signedReply) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
}

func (s *signedReply) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.buf.Write(b)
}

// flush sends the buffered answer with its HMAC.
func (s *signedReply) flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	body := s.buf.Bytes()
	s.ResponseWriter.Header().Set(PeerReplyHeader, s.pa.replyMAC(s.nonce, s.status, body))
	s.ResponseWriter.WriteHeader(s.status)
	_, _ = s.ResponseWriter.Write(body)
}

// PeerSigned reports whether r is a node-to-node write that this node
// authenticates by the cluster secret itself (a join carrying a proof,
// with a secret configured). The API's auth middleware lets such a request
// past its loopback rule; the handler then refuses a wrong proof with 403.
func (n *Node) PeerSigned(r *http.Request) bool {
	return n.peer.enabled() && r.Method == http.MethodPost && peerEndpoints[r.URL.Path] && r.Header.Get(PeerAuthHeader) != ""
}
