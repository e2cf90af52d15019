package cluster

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// vouchedApp stands for the API on each node: it establishes the caller
// (here: "client@REMOTE"), lets the node vouch for it, forwards writes,
// and the leader answers with what it could check of the caller. Requests
// between nodes are made to look as if they came from another machine.
func vouchedApp(n *Node) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(HopHeader) != "" {
			r.RemoteAddr = "10.0.0.9:40000" // another machine
		}
		// The API reads the voucher once, before it records its own verdict.
		caller, via, ok := n.Vouched(r)
		if ok {
			n.Vouch(r, caller)
		} else {
			n.Vouch(r, "client@"+r.RemoteAddr)
		}
		n.ForwardWrites(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusCreated, map[string]any{"caller": caller, "via": via, "ok": ok, "remote": r.RemoteAddr})
		})).ServeHTTP(w, r)
	})
}

type whoAnswer struct {
	Caller, Via, Remote string
	OK                  bool
}

func postWho(t *testing.T, addr string, body string, hdr map[string]string) (whoAnswer, http.Header) {
	return callWho(t, http.MethodPost, addr, body, hdr)
}

func callWho(t *testing.T, method, addr string, body string, hdr map[string]string) (whoAnswer, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, "http://"+addr+"/who?x=1", strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(b))
	var out whoAnswer
	require.NoError(t, json.Unmarshal(b, &out))
	return out, resp.Header
}

func serveVouched(nodes []*testNode) {
	for _, tn := range nodes {
		mux := http.NewServeMux()
		mux.Handle("/v1/cluster/", tn.node.Handler())
		mux.Handle("/", vouchedApp(tn.node))
		var h http.Handler = mux
		tn.handler.h.Store(&h)
	}
}

// With a cluster secret, a follower vouches for the caller of a write it
// forwards: the leader gets the client as the follower saw it, and the
// follower's id; the answer names the leader that performed it.
func TestForwardVouchesForTheCaller(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, func(c *Config) { c.ClusterSecret = "a-cluster-secret-of-32-bytes-xx" })
	serveVouched(nodes)
	for try := 0; ; try++ {
		require.Less(t, try, 20, "leadership kept moving under the request")
		leader := leaderOf(t, nodes)
		f := followersOf(nodes, leader)[0]
		got, hdr := postWho(t, f.httpAddr(), `{"key":"k"}`, nil)
		if hdr.Get(ForwardedToHeader) != leader.id {
			continue // leadership moved under the request: again
		}
		require.True(t, got.OK, "the leader takes the follower's word: %+v", got)
		require.Equal(t, f.id, got.Via)
		require.True(t, strings.HasPrefix(got.Caller, "client@127.0.0.1:"), got.Caller)
		require.Equal(t, "10.0.0.9:40000", got.Remote, "the connection itself came from the follower")

		// A client cannot vouch for itself: sent straight to a node with
		// made-up headers, nothing is taken (a GET, served wherever it
		// lands, whoever leads by then).
		got, _ = callWho(t, http.MethodGet, leader.httpAddr(), `{}`, map[string]string{HopHeader: "n9", CallerHeader: "actor=root", VouchHeader: "v1 ts=1 nonce=ab mac=cd"})
		require.False(t, got.OK)
		require.Equal(t, "n9", got.Via, "named, so that a refusal can say what would help")
		return
	}
}

// Without a secret, a forward proves nothing: the leader goes by what it
// sees (the follower's connection), and knows only whom the request names.
func TestForwardWithoutSecretVouchesForNothing(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	serveVouched(nodes)
	leader := leaderOf(t, nodes)
	f := followersOf(nodes, leader)[0]
	got, _ := postWho(t, f.httpAddr(), `{}`, nil)
	require.False(t, got.OK)
	require.Contains(t, []string{nodes[0].id, nodes[1].id, nodes[2].id}, got.Via)
}

// A voucher holds for the request it was made for: another body, another
// path, a replay, another secret or a stale time are refused.
func TestVoucherCoversTheRequest(t *testing.T) {
	t.Parallel()
	sm := newTestSM()
	sm.members["n2"] = engine.Member{ID: "n2"}
	n := &Node{peer: newPeerAuth("a-cluster-secret-of-32-bytes-xx"), log: testLogger(), cfg: Config{NodeID: "n1"}, clusterID: "c1", sm: sm}
	leader := peerTarget{node: "n1", cluster: "c1", version: PeerAuthVersion}
	now := time.Unix(1_800_000_000, 0)
	n.peer.nowFunc = func() time.Time { return now }
	n.peer.started = now.Add(-time.Hour) // the node has run since long before now
	signed := func(body string, secret string, at time.Time, to ...peerTarget) *http.Request {
		if len(to) == 0 {
			to = []peerTarget{leader}
		}
		r := httptest.NewRequest(http.MethodPost, "/v1/tasks?pretty=1", strings.NewReader(body))
		r.Header.Set(CallerHeader, "actor=ops")
		r.Header.Set(HopHeader, "n2")
		pa := newPeerAuth(secret)
		pa.nowFunc = func() time.Time { return at }
		r.Header.Set(VouchHeader, pa.vouch(r, "n2", to[0]))
		got, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		require.Equal(t, body, string(got), "the body is read and put back whole")
		r.Body = io.NopCloser(strings.NewReader(body))
		return r
	}
	r := signed(`{"key":"k"}`, "a-cluster-secret-of-32-bytes-xx", now)
	caller, via, ok := n.Vouched(r)
	require.True(t, ok)
	require.Equal(t, []string{"actor=ops", "n2"}, []string{caller, via})
	b, _ := io.ReadAll(r.Body)
	require.Equal(t, `{"key":"k"}`, string(b), "the handler still reads the body")

	_, _, ok = n.Vouched(r.Clone(ctxT(t)))
	require.False(t, ok, "a replay")

	r = signed(`{"key":"k"}`, "a-cluster-secret-of-32-bytes-xx", now)
	r.Body = io.NopCloser(bytes.NewReader([]byte(`{"key":"other"}`)))
	_, _, ok = n.Vouched(r)
	require.False(t, ok, "another body")

	r = signed(`{}`, "a-cluster-secret-of-32-bytes-xx", now)
	r.Header.Set(CallerHeader, "actor=root")
	_, _, ok = n.Vouched(r)
	require.False(t, ok, "another caller")

	r = signed(`{}`, "a-cluster-secret-of-32-bytes-xx", now)
	r.URL.Path = "/v1/cluster/remove"
	_, _, ok = n.Vouched(r)
	require.False(t, ok, "another path")

	_, _, ok = n.Vouched(signed(`{}`, "another-secret-of-32-bytes-xxxxx", now))
	require.False(t, ok, "another secret")

	_, _, ok = n.Vouched(signed(`{}`, "a-cluster-secret-of-32-bytes-xx", now.Add(-2*PeerAuthWindow)))
	require.False(t, ok, "signed too long ago")

	_, _, ok = n.Vouched(signed(`{}`, "a-cluster-secret-of-32-bytes-xx", now, peerTarget{node: "n3", cluster: "c1", version: PeerAuthVersion}))
	require.False(t, ok, "made for another leader")

	_, _, ok = n.Vouched(signed(`{}`, "a-cluster-secret-of-32-bytes-xx", now, peerTarget{node: "n1", cluster: "c2", version: PeerAuthVersion}))
	require.False(t, ok, "made for another cluster")

	_, _, ok = n.Vouched(signed(`{}`, "a-cluster-secret-of-32-bytes-xx", now, peerTarget{node: "n1", cluster: "c1", version: legacyProof}))
	require.False(t, ok, "the older format")
}

// countingBody counts the bytes a handler reads of a request's body.
type countingBody struct {
	r    io.Reader
	read int
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

func (c *countingBody) Close() error { return nil }

// A forward's headers cost anyone nothing to make up: a voucher that the
// headers alone refuse (any string, one for another node, a forwarder that
// is no member, a body larger than any vouched one) is refused before a
// byte of the body is read or hashed; each refusal is counted, and their
// log lines are a few a second, the next one saying how many were not
// written. (Before, each such request made the node read and hash up to
// 4 MiB and write a Warn line.)
func TestVoucherRefusedBeforeTheBody(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	sm := newTestSM()
	sm.members["n2"] = engine.Member{ID: "n2"}
	n := &Node{peer: newPeerAuth("a-cluster-secret-of-32-bytes-xx"), log: log, cfg: Config{NodeID: "n1"}, clusterID: "c1", sm: sm}
	n.refused = newRefusals(log, "n1")
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	big := bytes.Repeat([]byte("x"), 4<<20)
	cases := map[string]struct{ via, header string }{
		"any voucher":       {"n2", "anything"},
		"for another node":  {"n2", "v2 ts=" + ts + " nonce=ab cluster=c1 node=n3 mac=cd"},
		"stale":             {"n2", "v2 ts=1 nonce=ab cluster=c1 node=n1 mac=cd"},
		"from a non-member": {"n9", "v2 ts=" + ts + " nonce=ab cluster=c1 node=n1 mac=cd"},
		"a body too large":  {"n2", "v2 ts=" + ts + " nonce=ab cluster=c1 node=n1 mac=cd"},
	}
	const flood = 100
	for i := 0; i < flood; i++ {
		for name, c := range cases {
			body := &countingBody{r: bytes.NewReader(big)}
			r := httptest.NewRequest(http.MethodPost, "/v1/tasks", nil)
			r.Body, r.ContentLength = body, int64(len(big))
			r.Header.Set(HopHeader, c.via)
			r.Header.Set(VouchHeader, c.header)
			r.Header.Set(CallerHeader, "actor=root")
			_, _, ok := n.Vouched(r)
			require.False(t, ok, name)
			require.Zero(t, body.read, "%s: %d body bytes read before the voucher was refused", name, body.read)
		}
	}
	total := 0.0
	for _, reason := range []string{refusedVoucherHeader, refusedNotMember, refusedVoucherBody} {
		total += testutil.ToFloat64(n.refused.counter.WithLabelValues(reason))
	}
	require.Equal(t, float64(flood*len(cases)), total, "every refusal is counted")
	lines := strings.Count(logs.String(), "\n")
	require.Less(t, lines, 20, "%d log lines for %d refusals", lines, flood*len(cases))
	require.Contains(t, logs.String(), "reason=voucher_")
}
