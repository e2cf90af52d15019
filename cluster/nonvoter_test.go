package cluster

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// suffrageOf is member id's suffrage as node tn's status has it.
func suffrageOf(tn *testNode, id string) string {
	for _, m := range tn.node.Status().Members {
		if m.ID == id {
			return m.Suffrage
		}
	}
	return ""
}

// A read replica: joined with NonVoter it replicates, serves reads and
// forwards writes, leadership is never handed to it, and promote makes it
// a voter (404 for an unknown id, 409 for a voter).
func TestNonVoterReplicatesAndIsPromoted(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 2, nil, nil)
	replica := newTestNode(t, nodeOpts{id: "r1", join: nodes[0].httpAddr(), modify: func(c *Config) { c.NonVoter = true }})
	all := append(nodes, replica)
	waitConverged(t, all)
	require.Eventually(t, func() bool {
		for _, tn := range all {
			if suffrageOf(tn, "r1") != "nonvoter" || suffrageOf(tn, "n1") != "voter" || suffrageOf(tn, "n2") != "voter" {
				return false
			}
		}
		return true
	}, waitTimeout, 10*time.Millisecond, "every member sees r1 as a non-voter")

	// A write through the replica is forwarded, and the replica applies it.
	code, body := postKV(t, replica.httpAddr(), "via", "replica")
	require.Equal(t, http.StatusOK, code, body)
	waitValue(t, all, "via", "replica")

	// Transfers, to any voter or named, never make the replica lead.
	for range 2 {
		out := transferRetrying(t, replica, "")
		require.NotEqual(t, "r1", out.Leader)
		require.False(t, replica.node.IsLeader())
	}
	err := retry5xx(t, func() error { _, err := replica.client().TransferLeader(ctxT(t), "r1"); return err })
	requireAPIStatus(t, err, http.StatusBadRequest, "not a voter")

	// A join again (as reconcileSelf sends) changes no suffrage.
	require.NoError(t, retry5xx(t, func() error {
		return replica.client().Join(ctxT(t), JoinRequest{ID: "n2", RaftAddr: nodes[1].raftAddr, HTTPAddr: nodes[1].httpAddr(), NonVoter: true})
	}))
	require.Equal(t, "voter", suffrageOf(leaderOf(t, nodes), "n2"))

	requireAPIStatus(t, retry5xx(t, func() error { return replica.client().Promote(ctxT(t), "n9") }), http.StatusNotFound, "n9")
	requireAPIStatus(t, retry5xx(t, func() error { return replica.client().Promote(ctxT(t), "n1") }), http.StatusConflict, "already a voter")
	require.NoError(t, retry5xx(t, func() error { return replica.client().Promote(ctxT(t), "r1") }))
	require.Eventually(t, func() bool {
		for _, tn := range all {
			if suffrageOf(tn, "r1") != "voter" {
				return false
			}
		}
		return true
	}, waitTimeout, 10*time.Millisecond, "every member sees r1 as a voter")
	requireAPIStatus(t, retry5xx(t, func() error { return replica.client().Promote(ctxT(t), "r1") }), http.StatusConflict, "already a voter")

	// Promoted, it may lead.
	require.Equal(t, "r1", transferRetrying(t, nodes[0], "r1").Leader)
}

// retry5xx calls f again while it fails with a 5xx: after a transfer
// the others learn the new leader at its first heartbeat, and a transfer
// may time out on a loaded machine.
func retry5xx(t *testing.T, f func() error) error {
	t.Helper()
	var err error
	require.Eventually(t, func() bool {
		err = f()
		var ae *APIError
		return !errors.As(err, &ae) || ae.Status < 500
	}, waitTimeout, 20*time.Millisecond)
	return err
}

// transferRetrying asks tn for a transfer to id (retry5xx).
func transferRetrying(t *testing.T, tn *testNode, id string) TransferResponse {
	t.Helper()
	var out TransferResponse
	require.NoError(t, retry5xx(t, func() (err error) {
		out, err = tn.client().TransferLeader(ctxT(t), id)
		return err
	}))
	return out
}

func TestNonVoterCannotBootstrap(t *testing.T) {
	t.Parallel()
	_, err := tryTestNode(t, nodeOpts{id: "r1", bootstrap: true, modify: func(c *Config) { c.NonVoter = true }})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "non-voter cannot bootstrap")
}
