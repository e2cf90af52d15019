package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const testSecret = "s3cret-of-the-cluster-0123456789"

func withSecret(secret string) func(*Config) {
	return func(c *Config) { c.ClusterSecret = secret }
}

// A cluster with a secret admits only nodes that prove the same secret;
// the refusal is a 403 whose reason reaches the joining node's error, and
// nothing of the secret appears in it.
func TestClusterSecretJoin(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 2, nil, withSecret(testSecret))
	via := nodes[1].httpAddr() // a follower, most of the time: the proof survives forwarding

	_, err := tryTestNode(t, nodeOpts{id: "nosecret", join: via})
	require.Error(t, err)
	require.Contains(t, err.Error(), "HTTP 403")
	require.Contains(t, err.Error(), "requires cluster_secret")

	wrong := "another-secret-entirely-0123456789"
	_, err = tryTestNode(t, nodeOpts{id: "wrong", join: via, modify: withSecret(wrong)})
	require.Error(t, err)
	require.Contains(t, err.Error(), "HTTP 403")
	require.Contains(t, err.Error(), "differs")
	require.NotContains(t, err.Error(), wrong)
	require.NotContains(t, err.Error(), testSecret)

	require.Len(t, servers(t, leaderOf(t, nodes).node), 2, "no refused node was added")

	ok := newTestNode(t, nodeOpts{id: "n3", join: via, modify: withSecret(testSecret)})
	nodes = append(nodes, ok)
	waitConverged(t, nodes)
	require.Equal(t, nodes[0].node.ClusterID(), ok.node.ClusterID())
}

// A node with a secret does not join a cluster that has none (it would be
// a cluster it cannot authenticate), and that cluster says why.
func TestClusterSecretOnlyOnJoiner(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 1, nil, nil)
	_, err := tryTestNode(t, nodeOpts{id: "n2", join: nodes[0].httpAddr(), modify: withSecret(testSecret)})
	require.Error(t, err)
	require.Contains(t, err.Error(), "HTTP 403")
	require.Contains(t, err.Error(), "this node has none")
	require.Len(t, servers(t, nodes[0].node), 1)
}

// A node that answers a signed join with 200 but cannot prove the secret
// (a stranger posing as the cluster) is not trusted.
func TestClusterSecretChecksTheAnswer(t *testing.T) {
	t.Parallel()
	fake := http.NewServeMux()
	fake.HandleFunc("GET /v1/cluster/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, Status{NodeID: "fake", ClusterID: "feedface", PeerAuth: PeerAuthVersion})
	})
	fake.HandleFunc("POST /v1/cluster/join", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, JoinResponse{ID: "x", LeaderID: "fake", ClusterID: "feedface"})
	})
	srv := newHTTPServer(t, fake)
	c := &Client{Addr: srv, Secret: testSecret}
	err := c.Join(ctxT(t), JoinRequest{ID: "n9", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"})
	require.ErrorIs(t, err, ErrPeerAuth)
	require.Contains(t, err.Error(), "did not prove")
}

// A signed request is accepted once, at the node and in the cluster it was
// made for: replayed, signed too long ago, altered, made for another node
// or cluster or endpoint, or in the older format, it is refused.
func TestPeerAuthReplayStaleAltered(t *testing.T) {
	t.Parallel()
	signer := newPeerAuth(testSecret)
	checker := newPeerAuth(testSecret)
	n2 := peerTarget{node: "n2", cluster: "c1", version: PeerAuthVersion}
	body, err := json.Marshal(JoinRequest{ID: "n4", RaftAddr: "127.0.0.1:7104", HTTPAddr: "127.0.0.1:8104"})
	require.NoError(t, err)
	req := func(b []byte, header string) *http.Request {
		r, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://x/v1/cluster/join", bytes.NewReader(b))
		require.NoError(t, err)
		r.Header.Set(PeerAuthHeader, header)
		return r
	}
	sign := func(pa *peerAuth, path string, to peerTarget) string {
		h, nonce, err := pa.sign(requestMsg(http.MethodPost, path, body), to)
		require.NoError(t, err)
		require.NotEmpty(t, nonce)
		return h
	}
	header := sign(signer, "/v1/cluster/join", n2)
	require.NotContains(t, header, testSecret)
	require.True(t, strings.HasPrefix(header, "v2 "), header)

	_, err = checker.verify(req(body, header), 1<<20, n2)
	require.NoError(t, err)

	refused := func(r *http.Request, self peerTarget, why string) {
		t.Helper()
		_, err := newPeerAuth(testSecret).verify(r, 1<<20, self)
		require.ErrorIs(t, err, ErrPeerAuth)
		require.Contains(t, err.Error(), why)
	}
	_, err = checker.verify(req(body, header), 1<<20, n2)
	require.ErrorIs(t, err, ErrPeerAuth)
	require.Contains(t, err.Error(), "replay")

	refused(req(bytes.Replace(body, []byte("7104"), []byte("7666"), 1), header), n2, "differs")
	refused(req(body, header), peerTarget{node: "n3", cluster: "c1"}, "made for node n2, and this is node n3")
	refused(req(body, header), peerTarget{node: "n2", cluster: "c2"}, "made for cluster c1, and this node is in cluster c2")
	refused(req(body, header), peerTarget{node: "n2"}, "this node is in cluster (none yet)")
	refused(req(body, strings.Replace(header, "node=n2", "node=n3", 1)), peerTarget{node: "n3", cluster: "c1"}, "differs")

	old := newPeerAuth(testSecret)
	old.nowFunc = func() time.Time { return time.Now().Add(-PeerAuthWindow - time.Minute) }
	refused(req(body, sign(old, "/v1/cluster/join", n2)), n2, "check both clocks")

	refused(req(body, sign(signer, "/v1/cluster/announce", n2)), n2, "differs")

	// For a receiver on an older build: the older format, which this
	// build refuses.
	legacy := sign(signer, "/v1/cluster/join", peerTarget{node: "n2", cluster: "c1", version: legacyProof})
	require.True(t, strings.HasPrefix(legacy, "v1 "), legacy)
	refused(req(body, legacy), n2, "older build")

	for _, bad := range []string{"", "v2", "v3 ts=1 nonce=a cluster=c node=n mac=m", "v2 ts=1 nonce=a cluster=c node= mac=m",
		"v2 ts=1 nonce=a nonce=b node=n mac=m", "v2 ts=x nonce=a cluster=c node=n mac=m", "v1 ts=1 nonce=a cluster=c mac=m"} {
		refused(req(body, bad), n2, "")
	}
}

func TestClusterSecretTooShort(t *testing.T) {
	t.Parallel()
	_, err := New(Config{NodeID: "a", DataDir: t.TempDir(), RaftAddr: freeAddr(t), ClusterSecret: "short", Logger: testLogger()}, newTestSM())
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.Contains(t, err.Error(), "at least 16")
	require.NotContains(t, err.Error(), "short")
}

// newHTTPServer serves h on a test server and returns its host:port.
func newHTTPServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}
