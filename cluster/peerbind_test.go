package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	testpoll "github.com/heraldhq/herald/engine/enginetest/poll"
)

// captured is a signed request as it crossed the network: what someone
// listening on plain HTTP could replay.
type captured struct {
	method, path string
	header       http.Header
	body         []byte
}

// capture records every POST a Client sends, then sends it on.
type capture struct {
	mu   sync.Mutex
	reqs []captured
}

func (c *capture) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost {
		var body []byte
		if r.Body != nil {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, err
			}
			body = b
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		c.mu.Lock()
		c.reqs = append(c.reqs, captured{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
		c.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (c *capture) last(t *testing.T) captured {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.NotEmpty(t, c.reqs)
	return c.reqs[len(c.reqs)-1]
}

// replay sends a captured request, headers and body unchanged, to addr.
func replay(t *testing.T, addr string, c captured) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), c.method, "http://"+addr+c.path, bytes.NewReader(c.body))
	require.NoError(t, err)
	req.Header = c.header.Clone()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// moveLeadership hands leadership from leader to another node and waits
// until every node sees a new one.
func moveLeadership(t *testing.T, nodes []*testNode, leader *testNode) *testNode {
	t.Helper()
	// Under load it may have moved already: then any other leader will do.
	_ = leader.node.raft.LeadershipTransfer().Error()
	require.Eventually(t, func() bool {
		for _, tn := range nodes {
			if id := tn.node.leaderID(); id == "" || id == leader.id {
				return false
			}
		}
		return true
	}, waitTimeout, 10*time.Millisecond)
	return leaderOf(t, nodes)
}

// A signed join captured on its way to one member cannot be replayed to
// another member, which has not seen its nonce (a new leader: every join
// ends at the leader, which remembers its nonce until leadership moves):
// the proof names the node it was made for.
func TestSignedJoinIsGoodAtOneNodeOnly(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, withSecret(testSecret))
	leader := leaderOf(t, nodes)
	member := followersOf(nodes, leader)[0]
	// Joining an existing member at its own addresses changes nothing, so
	// the replay's outcome is the only thing that differs.
	req := JoinRequest{ID: member.id, RaftAddr: member.raftAddr, HTTPAddr: member.httpAddr()}
	tap := &capture{}
	c := &Client{Addr: leader.httpAddr(), Secret: testSecret, HTTP: &http.Client{Transport: tap}}
	// A busy machine may hold an election meanwhile (503): ask again.
	var err error
	testpoll.Until(t, waitTimeout, "a join through the leader", func() bool {
		if err = c.Join(ctxT(t), req); err != nil {
			t.Logf("join: %v; again", err)
		}
		return err == nil
	})
	sent := tap.last(t)

	status, body := replay(t, leader.httpAddr(), sent)
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "replay")

	next := moveLeadership(t, nodes, leader)
	status, body = replay(t, next.httpAddr(), sent)
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "made for node "+leader.id)
	require.Contains(t, body, "this is node "+next.id)
}

// A forwarded write captured on its way to the leader cannot be replayed
// to the next leader, which has not seen its nonce: the voucher names the
// leader it was made for, and the next one does not take the caller it
// names.
func TestVoucherIsGoodAtOneLeaderOnly(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, withSecret(testSecret))
	serveVouched(nodes)
	var (
		mu   sync.Mutex
		sent captured
	)
	tap := func(tn *testNode) {
		inner := tn.handler.h.Load()
		var tapped http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(VouchHeader) != "" {
				b, err := io.ReadAll(r.Body)
				require.NoError(t, err)
				r.Body = io.NopCloser(bytes.NewReader(b))
				mu.Lock()
				sent = captured{method: r.Method, path: r.URL.RequestURI(), header: r.Header.Clone(), body: b}
				mu.Unlock()
			}
			(*inner).ServeHTTP(w, r)
		})
		tn.handler.h.Store(&tapped)
	}
	for _, tn := range nodes {
		tap(tn)
	}
	var leader *testNode
	for try := 0; ; try++ {
		require.Less(t, try, 20, "leadership kept moving under the request")
		leader = leaderOf(t, nodes)
		got, hdr := postWho(t, followersOf(nodes, leader)[0].httpAddr(), `{"key":"k"}`, nil)
		if hdr.Get(ForwardedToHeader) == leader.id && got.OK {
			break
		}
	}
	mu.Lock()
	replay := sent
	mu.Unlock()
	require.NotEmpty(t, replay.header.Get(VouchHeader))

	// The next leader has not seen the nonce; it is asked itself (not over
	// HTTP, where a leader that moved again would answer 503 whatever it
	// thought of the voucher).
	next := moveLeadership(t, nodes, leader)
	r := httptest.NewRequest(replay.method, replay.path, bytes.NewReader(replay.body))
	r.Header = replay.header.Clone()
	_, _, ok := next.node.Vouched(r)
	require.False(t, ok, "the next leader takes a voucher made for %s", leader.id)
}

// Two clusters that share a cluster_secret (and, as they would, node
// names) are still two clusters: a join signed for one is refused by the
// other.
func TestSignedJoinIsGoodInOneClusterOnly(t *testing.T) {
	t.Parallel()
	a := newTestNode(t, nodeOpts{id: "n1", bootstrap: true, modify: withSecret(testSecret)})
	b := newTestNode(t, nodeOpts{id: "n1", bootstrap: true, modify: withSecret(testSecret)})
	require.NotEqual(t, a.node.ClusterID(), b.node.ClusterID())

	// A request that would change nothing at b (its own member, at its
	// own addresses), sent to a, where it is refused for its own reasons.
	req := JoinRequest{ID: "n1", RaftAddr: b.raftAddr, HTTPAddr: b.httpAddr()}
	tap := &capture{}
	c := &Client{Addr: a.httpAddr(), Secret: testSecret, HTTP: &http.Client{Transport: tap}}
	requireAPIStatus(t, c.Join(ctxT(t), req), http.StatusConflict, "leader's own id")

	status, body := replay(t, b.httpAddr(), tap.last(t))
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "made for cluster "+a.node.ClusterID())
	require.Contains(t, body, "this node is in cluster "+b.node.ClusterID())
}

// oldProof is the proof of builds before PeerAuthVersion 2 (main at
// 64d0e9f), written out by hand: "v1 ts= nonce= mac=", an HMAC over the
// label, the method, the path or request URI, the time, the nonce, the
// body's SHA-256 and, for a voucher, the caller and the forwarding node.
func oldProof(secret, label, method, target string, at time.Time, nonce string, body []byte, extra ...string) string {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, []byte(secret))
	ts := strconv.FormatInt(at.Unix(), 10)
	fmt.Fprintf(m, "%s\n%s\n%s\n%s\n%s\n%s", label, method, target, ts, nonce, hex.EncodeToString(sum[:]))
	for _, e := range extra {
		fmt.Fprintf(m, "\n%s", e)
	}
	return "v1 ts=" + ts + " nonce=" + nonce + " mac=" + hex.EncodeToString(m.Sum(nil))
}

// checkOldProof is an older build's check of a proof: it reads only v1.
func checkOldProof(secret, header, label, method, target string, body []byte, extra ...string) (nonce string, ok bool) {
	f := strings.Fields(header)
	if len(f) != 4 || f[0] != "v1" {
		return "", false // "malformed header", as the older build says
	}
	kv := map[string]string{}
	for _, x := range f[1:] {
		k, v, _ := strings.Cut(x, "=")
		kv[k] = v
	}
	sec, err := strconv.ParseInt(kv["ts"], 10, 64)
	if err != nil {
		return "", false
	}
	want := oldProof(secret, label, method, target, time.Unix(sec, 0), kv["nonce"], body, extra...)
	return kv["nonce"], hmac.Equal([]byte(header), []byte(want))
}

// oldReplyMAC is the answer's HMAC, unchanged between the builds.
func oldReplyMAC(secret, nonce string, status int, body []byte) string {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "herald-cluster-reply-v1\n%s\n%d\n%s", nonce, status, hex.EncodeToString(sum[:]))
	return hex.EncodeToString(m.Sum(nil))
}

// A join from a node on the previous build (its proof names no cluster
// and no node, so it could be replayed anywhere) is refused by this build
// with a 403 that says why; nothing changes.
func TestOldFormatJoinIsRefusedWithAReason(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 2, nil, withSecret(testSecret))
	member := nodes[1]
	body, err := json.Marshal(JoinRequest{ID: member.id, RaftAddr: member.raftAddr, HTTPAddr: member.httpAddr()})
	require.NoError(t, err)
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/json")
	hdr.Set(PeerAuthHeader, oldProof(testSecret, "herald-cluster-request-v1", http.MethodPost, "/v1/cluster/join", time.Now(), "0123abcd", body))
	status, answer := replay(t, nodes[0].httpAddr(), captured{method: http.MethodPost, path: "/v1/cluster/join", header: hdr, body: body})
	require.Equal(t, http.StatusForbidden, status, answer)
	require.Contains(t, answer, "older build")
	require.Contains(t, answer, "upgrade the sending node")
}

// A write forwarded by a follower on the previous build carries the old
// voucher: the leader does not take the caller it names (it could be a
// replay), and still serves the write, as one forwarded without a secret:
// by what it sees itself (with tokens: the token; audited with the
// follower's address).
func TestOldFormatVoucherIsNotTakenButTheWriteIsServed(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 2, nil, withSecret(testSecret))
	serveVouched(nodes)
	for try := 0; ; try++ {
		require.Less(t, try, 20, "leadership kept moving under the request")
		leader := leaderOf(t, nodes)
		f := followersOf(nodes, leader)[0]
		body := `{"key":"k"}`
		v := oldProof(testSecret, "herald-vouch-v1", http.MethodPost, "/who?x=1", time.Now(), "feed0001", []byte(body), "actor=ops", f.id)
		got, _ := postWho(t, leader.httpAddr(), body, map[string]string{HopHeader: f.id, CallerHeader: "actor=ops", VouchHeader: v})
		if !leader.node.IsLeader() {
			continue
		}
		require.False(t, got.OK, "an old voucher is not taken: %+v", got)
		require.Equal(t, f.id, got.Via)
		require.Equal(t, "10.0.0.9:40000", got.Remote, "served, by what the leader sees")
		return
	}
}

// oldNode stands for a member on the previous build: its status reports no
// peer_auth, and it checks only the old proof, as that build did.
func oldNode(t *testing.T, id, cluster string, onWrite func(w http.ResponseWriter, r *http.Request, body []byte)) http.Handler {
	t.Helper()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/cluster/status" {
			writeJSON(w, http.StatusOK, map[string]any{"node_id": id, "cluster_id": cluster, "state": "leader", "leader_id": id,
				"fsm_version": 2, "build": "64d0e9f", "members": []any{}})
			return
		}
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		onWrite(w, r, body)
	})
}

// During a rolling upgrade a node on this build joins through a member on
// the previous build: it signs in the format that member reads, and the
// member's answer is checked as before.
func TestJoinThroughAnOlderMember(t *testing.T) {
	t.Parallel()
	var proofs []string
	old := oldNode(t, "n1", "c0ffee", func(w http.ResponseWriter, r *http.Request, body []byte) {
		header := r.Header.Get(PeerAuthHeader)
		proofs = append(proofs, header)
		nonce, ok := checkOldProof(testSecret, header, "herald-cluster-request-v1", r.Method, r.URL.Path, body)
		if !ok {
			writeError(w, http.StatusForbidden, "malformed or wrong proof")
			return
		}
		answer, _ := json.Marshal(JoinResponse{ID: "n4", LeaderID: "n1", ClusterID: "c0ffee"})
		answer = append(answer, '\n')
		w.Header().Set(PeerReplyHeader, oldReplyMAC(testSecret, nonce, http.StatusOK, answer))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(answer)
	})
	c := &Client{Addr: newHTTPServer(t, old), Secret: testSecret}
	require.NoError(t, c.Join(ctxT(t), JoinRequest{ID: "n4", RaftAddr: "127.0.0.1:7104", HTTPAddr: "127.0.0.1:8104"}))
	require.Len(t, proofs, 1)
	require.True(t, strings.HasPrefix(proofs[0], "v1 "), proofs[0])
}

// During a rolling upgrade (followers first, the leader last) a follower
// on this build forwards writes to a leader on the previous build: it
// vouches in the format that leader reads, so the client's address still
// reaches the audit trail.
func TestForwardToAnOlderLeaderVouchesInItsFormat(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 2, nil, withSecret(testSecret))
	serveVouched(nodes)
	type seen struct {
		ok     bool
		caller string
	}
	got := make(chan seen, 10)
	for try := 0; ; try++ {
		require.Less(t, try, 20, "leadership kept moving under the request")
		leader := leaderOf(t, nodes)
		f := followersOf(nodes, leader)[0]
		var h http.Handler = oldNode(t, leader.id, leader.node.ClusterID(), func(w http.ResponseWriter, r *http.Request, body []byte) {
			caller := r.Header.Get(CallerHeader)
			_, ok := checkOldProof(testSecret, r.Header.Get(VouchHeader), "herald-vouch-v1", r.Method, r.URL.RequestURI(), body,
				caller, r.Header.Get(HopHeader))
			got <- seen{ok: ok, caller: caller}
			writeJSON(w, http.StatusCreated, map[string]any{"ok": ok})
		})
		leader.handler.h.Store(&h)
		_, hdr := postWho(t, f.httpAddr(), `{"key":"k"}`, nil)
		if hdr.Get(ForwardedToHeader) != leader.id {
			continue
		}
		s := <-got
		require.True(t, s.ok, "the older leader checks the voucher")
		require.True(t, strings.HasPrefix(s.caller, "client@127.0.0.1:"), s.caller)
		return
	}
}

// A forward that fails (the leader's HTTP answers nothing) is a 502 from
// the follower, and says nothing of the leader having done it: the API
// would otherwise take it for a write done and recorded elsewhere.
func TestFailedForwardDoesNotClaimTheLeaderDidIt(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 2, nil, nil)
	for try := 0; ; try++ {
		require.Less(t, try, 20, "leadership kept moving under the request")
		leader := leaderOf(t, nodes)
		f := followersOf(nodes, leader)[0]
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close() // hang up without an answer
			}
		})
		leader.handler.h.Store(&h)
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+f.httpAddr()+"/kv?key=a&value=b", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		why := readBody(t, resp)
		require.NoError(t, resp.Body.Close())
		if resp.StatusCode != http.StatusBadGateway {
			continue // leadership moved: the follower answered otherwise
		}
		require.Contains(t, why, "forwarding to leader "+leader.id)
		require.Empty(t, resp.Header.Get(ForwardedToHeader))
		return
	}
}
