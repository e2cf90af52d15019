package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/heraldhq/herald/engine/api/reply"
)

// Role is what a token may do. Each role includes the ones below it.
type Role int

// The roles, weakest first.
const (
	// RolePublic is no role at all: what anyone may fetch (the dashboard's
	// page and assets, which then ask for a token).
	RolePublic Role = iota
	// RoleRead may GET every endpoint, /metrics included.
	RoleRead
	// RoleOperate may also write: tasks, fires, alert acks and every other
	// operator action.
	RoleOperate
	// RoleAdmin may also change membership (join, leave, remove).
	RoleAdmin
)

// String is the role's name as written in the config.
func (r Role) String() string {
	switch r {
	case RolePublic:
		return "public"
	case RoleRead:
		return "read"
	case RoleOperate:
		return "operate"
	case RoleAdmin:
		return "admin"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// ParseRole reads a role name from the config: read, operate or admin.
func ParseRole(s string) (Role, error) {
	switch s {
	case "read":
		return RoleRead, nil
	case "operate":
		return RoleOperate, nil
	case "admin":
		return RoleAdmin, nil
	}
	return 0, fmt.Errorf("role %q: want read, operate or admin", s)
}

// Token is one API token of the node's config.
type Token struct {
	// Name identifies the token in audit records and answers; never the
	// secret itself.
	Name string
	Role Role
	// Secret is the bearer value (resolved from its ${ENV} reference).
	Secret string
}

// ActorLoopback is the actor of a write accepted without tokens, from the
// node's own machine.
const ActorLoopback = "loopback"

// ActorPeer is the actor of a node-to-node join accepted, without tokens,
// by its proof of the cluster secret.
const ActorPeer = "peer"

// ActorAnonymous is the actor of a read served without a token (no tokens
// configured, or a public path).
const ActorAnonymous = "anonymous"

// Identity is who sent a request, as the auth middleware established it.
type Identity struct {
	// Actor is the token's name, ActorLoopback or ActorAnonymous.
	Actor string
	// Role is what the actor may do.
	Role Role
	// Remote is the client's address (host): as this node sees it, or as
	// the member that forwarded the request vouched.
	Remote string
	// Via is the member that forwarded the request and vouched for the
	// caller (with the cluster secret); "" when the client called here.
	Via string
}

type identityKey struct{}

// IdentityFrom returns the identity the auth middleware put into a
// request's context.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// roleOverrides are the routes whose role is not the default (GET and HEAD
// read; every other method operate). Patterns are http.ServeMux patterns;
// the most specific one wins, as in the mux. A new endpoint needs an entry
// here only when it needs another role than its method's default.
var roleOverrides = map[string]Role{
	// Who did what, from where: see audit.go.
	"GET /v1/audit": RoleAdmin,
	// Membership: anyone who may change it may take the cluster over.
	"POST /v1/cluster/":   RoleAdmin,
	"PUT /v1/cluster/":    RoleAdmin,
	"PATCH /v1/cluster/":  RoleAdmin,
	"DELETE /v1/cluster/": RoleAdmin,
	// A backup holds the whole state, the audit trail included; a
	// restore replaces it.
	"GET /v1/snapshot":  RoleAdmin,
	"HEAD /v1/snapshot": RoleAdmin,
	"PUT /v1/snapshot":  RoleAdmin,
	// The probes (probe.go): load balancers and Kubernetes send no token;
	// the answers hold nothing a token guards.
	"GET /v1/health": RolePublic,
	"GET /v1/ready":  RolePublic,
	// WeCom's callbacks: the msg_signature is the credential, checked by
	// the receiver (a bad one is a counted 403); WeCom sends no token,
	// and calls from outside the node's machine.
	"GET /v1/wecom/callback/{channel}": RolePublic,
	wecomCallbackPOST:                  RolePublic,
	// The dashboard's page and assets: the page asks for a token itself.
	"GET /ui/":  RolePublic,
	"GET /{$}":  RolePublic,
	"HEAD /ui/": RolePublic,
}

// wecomCallbackPOST is the callback's write route: public, and left out
// of the audit trail (IsWecomCallback).
const wecomCallbackPOST = "POST /v1/wecom/callback/{channel}"

// IsWecomCallback reports a request for the WeCom callback receiver, which
// the signature authenticates: the edge's checks for people's requests
// (tokens, loopback, Host) do not apply to it.
func IsWecomCallback(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/v1/wecom/callback/")
}

// roleMux resolves roleOverrides with the mux's own matching rules, so an
// override means exactly the requests its pattern would route.
var roleMux = func() *http.ServeMux {
	m := http.NewServeMux()
	for p := range roleOverrides {
		m.Handle(p, http.NotFoundHandler())
	}
	return m
}()

// RouteRole is the role a request needs: its route's override, else read
// for GET and HEAD and operate for every other method.
func RouteRole(r *http.Request) Role {
	if _, p := roleMux.Handler(r); p != "" {
		if role, ok := roleOverrides[p]; ok {
			return role
		}
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return RoleRead
	}
	return RoleOperate
}

// TokenSet is the API tokens a node accepts, replaceable while it serves
// (a config reload): a request that starts after Set is checked against
// the new tokens, one in flight keeps the identity it was given.
type TokenSet struct{ p atomic.Pointer[[]tokenHash] }

// NewTokenSet returns a set holding tokens.
func NewTokenSet(tokens []Token) *TokenSet {
	s := &TokenSet{}
	s.Set(tokens)
	return s
}

// Set replaces the tokens.
func (s *TokenSet) Set(tokens []Token) {
	hashes := make([]tokenHash, 0, len(tokens))
	for _, t := range tokens {
		hashes = append(hashes, tokenHash{name: t.Name, role: t.Role, sum: sha256.Sum256([]byte(t.Secret))})
	}
	s.p.Store(&hashes)
}

func (s *TokenSet) load() []tokenHash { return *s.p.Load() }

// authenticator checks every request against the node's tokens.
type authenticator struct {
	tokens     *TokenSet
	peerSigned func(*http.Request) bool
	peerRead   func(*http.Request) bool
	forwarding Forwarding
	hosts      hostSet // without tokens: the names this node answers to (local.go)
}

type tokenHash struct {
	name string
	role Role
	sum  [sha256.Size]byte
}

func newAuthenticator(tokens []Token, set *TokenSet, hosts []string) *authenticator {
	if set == nil {
		set = NewTokenSet(tokens)
	}
	return &authenticator{tokens: set, hosts: newHostSet(hosts)}
}

// lookup finds the token whose secret is presented. Every configured token
// is compared, in constant time over equal-length hashes, so the answer's
// timing tells nothing about how much of a secret was right or which token
// nearly matched.
func (a *authenticator) lookup(presented string) (tokenHash, bool) {
	sum := sha256.Sum256([]byte(presented))
	var (
		found tokenHash
		ok    int
	)
	for _, t := range a.tokens.load() {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			found, ok = t, 1
		}
	}
	return found, ok == 1
}

// middleware establishes the caller's identity and refuses what its role
// does not allow: 401 without a known token, 403 with too weak a role.
// It runs before forwarding, so a follower never forwards a request it
// refused, and the leader checks the forwarded request (which carries the
// caller's Authorization header, never the follower's) again.
func (a *authenticator) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need := RouteRole(r)
		id := Identity{Actor: ActorAnonymous, Remote: remoteHost(r)}
		// A write forwarded by a member that vouches for its caller with
		// the cluster secret: the client's address is the one the member
		// saw, and without tokens its verdict on loopback holds. Checking a
		// voucher means reading and hashing the body, so with tokens it is
		// checked only once the caller's token is known: a stranger's
		// made-up forward costs nothing but its headers.
		var (
			vouched   Identity
			via       string
			isVouched bool
		)
		takeVoucher := func() {
			vouched, via, isVouched = callerOf(a.forwarding, r)
			if isVouched {
				id.Remote, id.Via = vouched.Remote, vouched.Via
			}
		}
		switch {
		case len(a.tokens.load()) == 0:
			takeVoucher()
			// No tokens: anyone reads, only this machine writes. A
			// loopback connection is the one thing a remote caller cannot
			// fake (headers can be), and it is what `herald dev` and a
			// single-machine install need; but only a request addressed to
			// this node by name and not passed on by a proxy is a person's
			// (local.go). A member's vouched forward was checked there; a
			// join signed with the cluster secret is checked by its
			// handler, and names the member as its joiner was told to.
			peerSigned := need > RoleRead && a.peerSigned != nil && a.peerSigned(r)
			if !isVouched && !peerSigned {
				if why := a.hosts.notLocal(r); why != "" {
					writeAuthError(w, http.StatusForbidden, authLoopback, why)
					return
				}
			}
			switch {
			case isVouched:
				id.Actor, id.Role = vouched.Actor, vouched.Role
			case isLoopback(r.RemoteAddr):
				id.Actor, id.Role = ActorLoopback, RoleAdmin
			case peerSigned:
				// A join proving the cluster secret: the cluster handler
				// checks the proof and refuses a wrong one.
				id.Actor, id.Role = ActorPeer, RoleAdmin
			default:
				id.Role = RoleRead
			}
			if need > id.Role {
				w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
				writeAuthError(w, http.StatusUnauthorized, authLoopback, fmt.Sprintf(
					"%s %s: this node has no API tokens, so it accepts writes from its own machine (loopback) only%s; "+
						"configure `tokens:` (name, role, token) on every node and send Authorization: Bearer TOKEN (herald --token, HERALD_TOKEN)",
					r.Method, r.URL.Path, notVouched(via)))
				return
			}
		case need == RolePublic:
			// Identify the caller if it says who it is; never refuse.
			if t, ok := a.lookup(bearer(r)); ok {
				id.Actor, id.Role = t.name, t.role
				takeVoucher()
			}
		case need == RoleRead && bearer(r) == "" && a.peerRead != nil && a.peerRead(r):
			// Another member's read of what only members ask for, by the
			// node credential: it carries no operator's token.
			id.Actor, id.Role = ActorPeer, RoleRead
		default:
			presented := bearer(r)
			if presented == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
				writeAuthError(w, http.StatusUnauthorized, authToken, fmt.Sprintf(
					"%s %s needs a token with role %s: send Authorization: Bearer TOKEN (herald --token, HERALD_TOKEN)", r.Method, r.URL.Path, need))
				return
			}
			t, ok := a.lookup(presented)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="herald", error="invalid_token"`)
				writeAuthError(w, http.StatusUnauthorized, authToken, "unknown token: it matches none of this node's tokens")
				return
			}
			if t.role < need {
				writeAuthError(w, http.StatusForbidden, authToken, fmt.Sprintf(
					"token %s has role %s; %s %s needs %s", t.name, t.role, r.Method, r.URL.Path, need))
				return
			}
			id.Actor, id.Role = t.name, t.role
			takeVoucher()
		}
		if a.forwarding != nil && !isRead(r) { // only writes are forwarded
			a.forwarding.Vouch(r, encodeCaller(id))
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}

// How a refused caller can get in, in the "auth" field of a 401 or 403:
// the dashboard asks for a token only when one would help.
const (
	authToken    = "token"    // send a (stronger) token
	authLoopback = "loopback" // no tokens here: write from the node's machine
)

func writeAuthError(w http.ResponseWriter, code int, auth, reason string) {
	writeJSON(w, code, reply.With(reason, map[string]any{"auth": auth}))
}

// bearer returns the token of an "Authorization: Bearer TOKEN" header, or
// "".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// isLoopback reports whether a connection's address is this machine's own.
// An in-process request (httptest's ServeHTTP) has the address 192.0.2.1,
// which is not.
func isLoopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackAddr reports whether a listen address (host:port) can be
// reached from this machine only: the agent warns at start when its HTTP
// address is not and no tokens are configured, or when its Raft address is
// not and TLS or a cluster secret is missing.
func IsLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
