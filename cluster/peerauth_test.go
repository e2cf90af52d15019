package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
	fake.HandleFunc("POST /v1/cluster/join", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, JoinResponse{ID: "x", LeaderID: "fake", ClusterID: "feedface"})
	})
	srv := newHTTPServer(t, fake)
	c := &Client{Addr: srv, Secret: testSecret}
	err := c.Join(ctxT(t), JoinRequest{ID: "n9", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"})
	require.ErrorIs(t, err, ErrPeerAuth)
	require.Contains(t, err.Error(), "did not prove")
}

// A signed request is accepted once: replayed, or signed too long ago, or
// altered, it is refused.
func TestPeerAuthReplayStaleAltered(t *testing.T) {
	t.Parallel()
	signer := newPeerAuth(testSecret)
	checker := newPeerAuth(testSecret)
	body, err := json.Marshal(JoinRequest{ID: "n2", RaftAddr: "127.0.0.1:7102", HTTPAddr: "127.0.0.1:8102"})
	require.NoError(t, err)
	req := func(b []byte) *http.Request {
		r, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://x/v1/cluster/join", bytes.NewReader(b))
		require.NoError(t, err)
		return r
	}
	r := req(body)
	_, err = signer.sign(r, body)
	require.NoError(t, err)
	header := r.Header.Get(PeerAuthHeader)
	require.NotContains(t, header, testSecret)

	_, err = checker.verify(r, 1<<20)
	require.NoError(t, err)

	replay := req(body)
	replay.Header.Set(PeerAuthHeader, header)
	_, err = checker.verify(replay, 1<<20)
	require.ErrorIs(t, err, ErrPeerAuth)
	require.Contains(t, err.Error(), "replay")

	altered := req(bytes.Replace(body, []byte("7102"), []byte("7666"), 1))
	altered.Header.Set(PeerAuthHeader, header)
	_, err = newPeerAuth(testSecret).verify(altered, 1<<20)
	require.ErrorIs(t, err, ErrPeerAuth)
	require.Contains(t, err.Error(), "differs")

	old := newPeerAuth(testSecret)
	old.nowFunc = func() time.Time { return time.Now().Add(-PeerAuthWindow - time.Minute) }
	stale := req(body)
	_, err = old.sign(stale, body)
	require.NoError(t, err)
	_, err = newPeerAuth(testSecret).verify(stale, 1<<20)
	require.ErrorIs(t, err, ErrPeerAuth)
	require.Contains(t, err.Error(), "check both clocks")

	// Signed for another endpoint: refused here.
	other, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://x/v1/cluster/announce", bytes.NewReader(body))
	require.NoError(t, err)
	_, err = signer.sign(other, body)
	require.NoError(t, err)
	moved := req(body)
	moved.Header.Set(PeerAuthHeader, other.Header.Get(PeerAuthHeader))
	_, err = newPeerAuth(testSecret).verify(moved, 1<<20)
	require.ErrorIs(t, err, ErrPeerAuth)
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
