package cluster

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A node keeps the nonces it has seen in memory only: once restarted, it
// takes no proof signed before it started, so a join proof or a voucher
// captured on the wire cannot be replayed to it within its window. A
// proof signed after the start is taken as before. (On the code before
// ErrSignedBeforeStart, the replayed join proof was taken: 400 for its
// body, not 503.)
func TestNoReplayAfterRestart(t *testing.T) {
	t.Parallel()
	first := newTestNode(t, nodeOpts{id: "n1", bootstrap: true, modify: withSecret(testSecret)})
	waitConverged(t, []*testNode{first})
	first.node.peer.mu.Lock()
	first.node.peer.started = time.Now().Add(-time.Minute) // it has run for a minute
	first.node.peer.mu.Unlock()
	self := peerTarget{node: "n1", cluster: first.node.ClusterID(), version: PeerAuthVersion}

	// A join proof captured 10 s ago; its body is refused after the proof
	// is taken (400), so the test adds no voter.
	body, err := json.Marshal(JoinRequest{ID: "-bad-id", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"})
	require.NoError(t, err)
	earlier := newPeerAuth(testSecret)
	earlier.nowFunc = func() time.Time { return time.Now().Add(-10 * time.Second) }
	proof, _, err := earlier.sign(requestMsg(http.MethodPost, "/v1/cluster/join", body), self)
	require.NoError(t, err)
	// And a voucher of a write made for n1, captured with it (its
	// forwarder must be a member: the only one here is n1).
	w := mustRequest(t, http.MethodPost, "http://x/v1/tasks", `{"key":"k"}`)
	w.Header.Set(CallerHeader, "actor=ops")
	voucher := earlier.vouch(w, "n1", self)
	require.NotEmpty(t, voucher)

	post := func(tn *testNode) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+tn.httpAddr()+"/v1/cluster/join", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set(PeerAuthHeader, proof)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	vouched := func(n *Node) bool {
		r := mustRequest(t, http.MethodPost, "http://x/v1/tasks", `{"key":"k"}`)
		r.Header.Set(CallerHeader, "actor=ops")
		r.Header.Set(HopHeader, "n1")
		r.Header.Set(VouchHeader, voucher)
		_, _, ok := n.Vouched(r)
		return ok
	}

	code, answer := post(first)
	require.Equal(t, http.StatusBadRequest, code, "the proof is taken, the body refused: %s", answer)
	code, answer = post(first)
	require.Equal(t, http.StatusForbidden, code, answer)
	require.Contains(t, answer, "replay")
	require.True(t, vouched(first.node), "the voucher is taken once")
	require.False(t, vouched(first.node), "and not twice")

	first.stop()
	back := newTestNode(t, nodeOpts{id: "n1", dir: first.dir, raftAddr: first.raftAddr, modify: withSecret(testSecret)})
	waitConverged(t, []*testNode{back})

	code, answer = post(back)
	require.Equal(t, http.StatusServiceUnavailable, code, "the replay after the restart is refused: %s", answer)
	require.Contains(t, answer, "signed before this node started")
	require.False(t, vouched(back.node), "the voucher replayed after the restart is refused")

	// Proofs signed now are taken.
	fresh, _, err := newPeerAuth(testSecret).sign(requestMsg(http.MethodPost, "/v1/cluster/join", body), self)
	require.NoError(t, err)
	proof = fresh
	code, answer = post(back)
	require.Equal(t, http.StatusBadRequest, code, answer)
}

func mustRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(ctxT(t), method, url, strings.NewReader(body))
	require.NoError(t, err)
	return r
}
