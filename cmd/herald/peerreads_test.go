package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/engine/api"
)

// The status fan-out (every /v1/status, which the dashboard polls) asks
// each member for its rule set with no token stronger than read: the read
// token, and the node read credential with a cluster_secret; the admin
// token only when there is neither, which the agent warns of. (On the code
// before, it carried the admin token in every case.)
func TestStatusFanOutCarriesNoAdminToken(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		last http.Header
	)
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = r.Header.Clone()
		mu.Unlock()
		_, _ = w.Write([]byte(`{"rules_hash":"abc"}`))
	}))
	t.Cleanup(member.Close)
	const (
		admin  = "fan-out-admin-token-0123456789"
		read   = "fan-out-read-token-01234567890"
		secret = "fan-out-cluster-secret-0123456789"
	)
	adminOnly := []api.Token{{Name: "root", Role: api.RoleAdmin, Secret: admin}}
	both := append([]api.Token{{Name: "wall", Role: api.RoleRead, Secret: read}}, adminOnly...)
	ask := func(tokens []api.Token, clusterSecret string) http.Header {
		t.Helper()
		n := &node{cfg: nodeConfig{NodeID: "n1", apiTokens: tokens, clusterSecret: clusterSecret}, peerHTTP: member.Client()}
		got := n.peerRules(context.Background(), []cluster.MemberStatus{{ID: "n2", HTTPAddr: member.Listener.Addr().String()}})
		require.Equal(t, "abc", got[0].Hash)
		mu.Lock()
		defer mu.Unlock()
		return last
	}

	h := ask(both, secret)
	require.Equal(t, "Bearer "+read, h.Get("Authorization"))
	require.NotEmpty(t, h.Get(cluster.NodeReadHeader))

	h = ask(adminOnly, secret)
	require.Empty(t, h.Get("Authorization"), "the credential stands for a read token")
	require.NotEmpty(t, h.Get(cluster.NodeReadHeader))

	h = ask(both, "")
	require.Equal(t, "Bearer "+read, h.Get("Authorization"))
	require.Empty(t, h.Get(cluster.NodeReadHeader))

	require.Empty(t, nodeReadsTooStrong(both, false))
	require.Empty(t, nodeReadsTooStrong(adminOnly, true))
	require.Equal(t, "root (admin)", nodeReadsTooStrong(adminOnly, false), "warned at start")
}
