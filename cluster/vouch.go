package cluster

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
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
	// VouchHeader carries "v2 ts=UNIX nonce=HEX cluster=ID node=ID
	// mac=HEX": an HMAC keyed by the cluster secret over the cluster and the
	// node (the leader) it is for, the method, the request URI, the time,
	// the nonce, the body's SHA-256, the caller and the forwarding node
	// (peerauth.go: the same proof as a node-to-node request's).
	VouchHeader = "X-Herald-Vouch"
	// ForwardedToHeader, on an answer, names the leader that performed the
	// write this node forwarded (and recorded it in the audit trail).
	ForwardedToHeader = "X-Herald-Forwarded-To"
	// maxVouchedBody is the largest body a forward is signed with: the
	// signature covers the body, so it is read first. It is the API's
	// largest write body (engine/api: POST /v1/deliveries/retry, 1 MiB)
	// and a little: a larger body is forwarded unsigned, as without a
	// secret (and the API refuses it anyway), and the leader reads no more
	// than this of a forward before it knows the voucher checks.
	maxVouchedBody = 1<<20 + 4<<10
)

// vouchMsg is what a forward's voucher covers: the request, the caller it
// names and the node that forwards it.
func vouchMsg(r *http.Request, body []byte, caller, via string) signedMsg {
	return signedMsg{kind: kindVouch, method: r.Method, target: r.URL.RequestURI(), body: body, extra: []string{caller, via}}
}

// vouch signs a forward of r by node via to node to: it returns the
// VouchHeader value, or "" when there is nothing to vouch for (no secret,
// no caller, a body too large). r's body is read and put back.
func (pa *peerAuth) vouch(r *http.Request, via string, to peerTarget) string {
	caller := r.Header.Get(CallerHeader)
	if !pa.enabled() || caller == "" {
		return ""
	}
	body, ok := peekBody(r)
	if !ok {
		return ""
	}
	header, _, err := pa.sign(vouchMsg(r, body, caller, via), to)
	if err != nil {
		return ""
	}
	return header
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
// that does not check (counted and logged, a few a second); via then
// names the node r claims forwarded it.
//
// Anyone can send the headers of a forward, so the body is read and
// hashed only once everything the headers alone can tell checks: the
// proof's format, that it was made for this node of this cluster within
// the window, that via is a current member, and that the body announced
// is no larger than a vouched one may be.
func (n *Node) Vouched(r *http.Request) (caller, via string, ok bool) {
	via = r.Header.Get(HopHeader)
	header := r.Header.Get(VouchHeader)
	if via == "" || header == "" || !n.peer.enabled() {
		return "", via, false
	}
	refuse := func(reason, why string) (string, string, bool) {
		n.refuse(reason, "a forwarded write's voucher does not check; its caller is not taken", "via", via, "remote", r.RemoteAddr, "path", r.URL.Path, "why", why)
		return "", via, false
	}
	if _, err := n.peer.precheck(header, n.self()); err != nil {
		return refuse(refusedVoucherHeader, err.Error())
	}
	if !n.isMember(via) {
		return refuse(refusedNotMember, fmt.Sprintf("%s is not a member of this cluster", via))
	}
	if r.ContentLength > maxVouchedBody {
		return refuse(refusedVoucherBody, fmt.Sprintf("body of %d bytes: larger than any vouched write (%d)", r.ContentLength, maxVouchedBody))
	}
	b, ok := peekBody(r)
	if !ok {
		return refuse(refusedVoucherBody, "body unreadable or too large")
	}
	caller = r.Header.Get(CallerHeader)
	if _, err := n.peer.check(header, vouchMsg(r, b, caller, via), n.self()); err != nil {
		return refuse(refusedVoucherMAC, err.Error())
	}
	return caller, via, true
}

// isMember reports whether id is one of the cluster's members (a Node
// built without a state machine, in tests, knows none).
func (n *Node) isMember(id string) bool {
	if n.sm == nil {
		return false
	}
	for _, m := range n.sm.Members() {
		if m.ID == id {
			return true
		}
	}
	return false
}

// Forwarded reports an answer this node got from the leader for a write it
// forwarded: the leader performed the write and recorded it.
func (n *Node) Forwarded(h http.Header) bool { return h.Get(ForwardedToHeader) != "" }
