package cluster

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A node's reads of another member (status, reports) carry its read token
// and the node read credential, never its admin token; the member takes
// the credential for exactly those reads. A join still carries the admin
// token, to the node it joins through only. (On the code before, the reads
// carried the admin token.)
func TestNodeReadsCarryNoAdminToken(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		seen = map[string]http.Header{}
	)
	member := &Node{cfg: Config{NodeID: "m", ClusterSecret: testSecret}, peer: newPeerAuth(testSecret)}
	fake := http.NewServeMux()
	capture := func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		seen[r.Method+" "+r.URL.Path] = r.Header.Clone()
		mu.Unlock()
		if !member.PeerRead(r) {
			http.Error(w, "no credential", http.StatusUnauthorized)
			return false
		}
		return true
	}
	fake.HandleFunc("GET /v1/cluster/status", func(w http.ResponseWriter, r *http.Request) {
		if capture(w, r) {
			writeJSON(w, http.StatusOK, Status{NodeID: "m", PeerAuth: PeerAuthVersion})
		}
	})
	fake.HandleFunc("GET /v1/cluster/report", member.provenRead(func(w http.ResponseWriter, r *http.Request) {
		if capture(w, r) {
			writeJSON(w, http.StatusOK, Report{NodeID: "m"})
		}
	}))
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()

	n := &Node{cfg: Config{NodeID: "n1", ClusterSecret: testSecret, Token: "the-admin-token-0123456789", ReadToken: "the-read-token-0123456789"},
		client: http.DefaultClient}
	_, err := n.clientFor(addr).Status(ctxT(t))
	require.NoError(t, err)
	_, err = n.clientFor(addr).Report(ctxT(t))
	require.NoError(t, err)
	for _, k := range []string{"GET /v1/cluster/status", "GET /v1/cluster/report"} {
		h := seen[k]
		require.Equal(t, "Bearer the-read-token-0123456789", h.Get("Authorization"), k)
		require.NotEmpty(t, h.Get(NodeReadHeader), k)
		require.NotContains(t, h.Get(NodeReadHeader), testSecret)
	}

	// The credential is for those reads only, and for this secret.
	r := httptest.NewRequest(http.MethodGet, "/v1/deliveries", nil)
	r.Header.Set(NodeReadHeader, seen["GET /v1/cluster/status"].Get(NodeReadHeader))
	require.False(t, member.PeerRead(r), "another path")
	r = httptest.NewRequest(http.MethodGet, "/v1/cluster/status", nil)
	r.Header.Set(NodeReadHeader, nodeRead("another-secret-0123456789abcdef", http.MethodGet, "/v1/cluster/status"))
	require.False(t, member.PeerRead(r), "another secret")
	require.False(t, (&Node{cfg: Config{}}).PeerRead(r), "a member without a secret takes none")

	// Without a read token, with a secret: no token at all.
	n.cfg.ReadToken = ""
	_, err = n.clientFor(addr).Status(ctxT(t))
	require.NoError(t, err)
	require.Empty(t, seen["GET /v1/cluster/status"].Get("Authorization"))
}
