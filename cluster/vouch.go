package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// A write a follower forwards reaches the leader from the follower's
// address, so the leader cannot see who the client was, nor (without
// tokens) that the follower accepted it from its own machine. With a
// cluster secret, the follower vouches for the caller it established: it
// signs the forward, and the leader trusts the caller named in it (the API
// records it in the audit trail; without tokens, the follower's loopback
// verdict holds). Without a secret, nothing a forward says about its
// caller can be checked, and the leader goes by what it sees itself.
const (
	// CallerHeader carries who the forwarding node established the caller
	// to be (engine/api encodes it; opaque here).
	CallerHeader = "X-Herald-Caller"
	// VouchHeader carries "v1 ts=UNIX nonce=HEX mac=HEX": an HMAC keyed by
	// the cluster secret over the method, the request URI, the time, the
	// nonce, the body's SHA-256, the caller and the forwarding node.
	VouchHeader = "X-Herald-Vouch"
	// ForwardedToHeader, on an answer, names the leader that performed the
	// write this node forwarded (and recorded it in the audit trail).
	ForwardedToHeader = "X-Herald-Forwarded-To"
	// maxVouchedBody is the largest body a forward is signed with: the
	// signature covers the body, so it is read first. The API takes no
	// larger write; a larger body is forwarded unsigned, as without a
	// secret.
	maxVouchedBody = 4 << 20
)

func (pa *peerAuth) vouchMAC(method, uri, ts, nonce, caller, via string, body []byte) string {
	m := hmac.New(sha256.New, pa.secret)
	fmt.Fprintf(m, "herald-vouch-v1\n%s\n%s\n%s\n%s\n%s\n%s\n%s", method, uri, ts, nonce, bodyDigest(body), caller, via)
	return hex.EncodeToString(m.Sum(nil))
}

// vouch signs a forward of r by node via: it returns the VouchHeader
// value, or "" when there is nothing to vouch for (no secret, no caller, a
// body too large). r's body is read and put back.
func (pa *peerAuth) vouch(r *http.Request, via string) string {
	caller := r.Header.Get(CallerHeader)
	if !pa.enabled() || caller == "" {
		return ""
	}
	body, ok := peekBody(r)
	if !ok {
		return ""
	}
	nb := make([]byte, 16)
	if _, err := rand.Read(nb); err != nil {
		return ""
	}
	nonce := hex.EncodeToString(nb)
	ts := strconv.FormatInt(pa.nowFunc().Unix(), 10)
	return "v1 ts=" + ts + " nonce=" + nonce + " mac=" + pa.vouchMAC(r.Method, r.URL.RequestURI(), ts, nonce, caller, via, body)
}

// peekBody reads r's body, up to maxVouchedBody, and puts back all of it
// (what was read, then the rest): false when it is larger or unreadable.
func peekBody(r *http.Request) ([]byte, bool) {
	if r.Body == nil {
		return nil, true
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxVouchedBody+1))
	r.Body = readCloser{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
	return b, err == nil && len(b) <= maxVouchedBody
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Vouch records on r who this node established the caller to be; a
// forward of r to the leader carries it, signed. A client's own value is
// replaced. (engine/api calls it for every request.)
func (n *Node) Vouch(r *http.Request, caller string) {
	r.Header.Set(CallerHeader, caller)
}

// Vouched returns the caller a member vouched for on a forwarded request,
// and that member's id. ok is false when r was not forwarded, or its
// forward proves nothing: no cluster secret here, no signature, or one
// that does not check (logged); via then names the node r claims
// forwarded it.
func (n *Node) Vouched(r *http.Request) (caller, via string, ok bool) {
	via = r.Header.Get(HopHeader)
	header := r.Header.Get(VouchHeader)
	if via == "" || header == "" || !n.peer.enabled() {
		return "", via, false
	}
	refuse := func(why string) (string, string, bool) {
		n.log.Warn("a forwarded write's voucher does not check; its caller is not taken", "via", via, "remote", r.RemoteAddr, "path", r.URL.Path, "why", why)
		return "", via, false
	}
	ts, nonce, mac, good := parseAuthHeader(header)
	if !good {
		return refuse("malformed " + VouchHeader)
	}
	b, ok := peekBody(r)
	if !ok {
		return refuse("body unreadable or too large")
	}
	caller = r.Header.Get(CallerHeader)
	if !hmac.Equal([]byte(mac), []byte(n.peer.vouchMAC(r.Method, r.URL.RequestURI(), ts, nonce, caller, via, b))) {
		return refuse("signed with another cluster_secret, or altered on the way")
	}
	sec, _ := strconv.ParseInt(ts, 10, 64) // parseAuthHeader checked it
	now := n.peer.nowFunc()
	if skew := now.Unix() - sec; skew > int64(PeerAuthWindow.Seconds()) || -skew > int64(PeerAuthWindow.Seconds()) {
		return refuse("signed " + strconv.FormatInt(skew, 10) + "s away from this node's clock")
	}
	if !n.peer.remember(nonce, now) {
		return refuse("a replay")
	}
	return caller, via, true
}

// Forwarded reports an answer this node got from the leader for a write it
// forwarded: the leader performed the write and recorded it.
func (n *Node) Forwarded(h http.Header) bool { return h.Get(ForwardedToHeader) != "" }
