package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/cluster"
)

// peerAuthFrom is the last build whose join proofs and vouchers name
// neither the cluster nor the node they are for (format v1).
const peerAuthFrom = "64d0e9f"

// auditVia is the via of the audit record of the task submitted as key
// ("" when the leader did not take the follower's voucher), read on addr.
func auditVia(t *testing.T, addr, key string) (string, bool) {
	t.Helper()
	var out struct {
		Records []struct {
			Action, Target, Via, Node string
		} `json:"records"`
	}
	if err := getJSON(addr, "/v1/audit", &out); err != nil {
		return "", false
	}
	for _, r := range out.Records {
		if r.Action == "task.submit" && r.Target == key {
			return r.Via, true
		}
	}
	return "", false
}

// TestSecretAcrossTheUpgrade runs a cluster with cluster_secret on the
// build before bound proofs (peerAuthFrom) and this one side by side, as
// a rolling upgrade does: this build joins through an older member and
// vouches in the format an older leader reads (the client's follower still
// reaches the audit trail); an older node's join is refused by this build
// with the reason; and a write an older follower forwards to a leader on
// this build, without tokens, is refused (403): its voucher is one this
// build no longer takes, and its X-Forwarded-For makes it a proxy's.
func TestSecretAcrossTheUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test; skipped with -short")
	}
	old := oldHerald(t, peerAuthFrom)
	c := setupE2E(t)
	require.NoError(t, os.WriteFile(filepath.Join(c.rules, "remind.lua"), []byte(upgradeRemind), 0o644))
	cfg, err := os.ReadFile(c.config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(c.config, append(cfg, []byte("cluster_secret: \"${HT_CLUSTER_SECRET}\"\n")...), 0o644))
	t.Setenv("HT_CLUSTER_SECRET", "upgrade-secret-0123456789abcdef")
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	n1.bin, n3.bin = old, old

	c.start(n1, "--bootstrap")
	eventually(t, 30*time.Second, "n1 leads", func() bool { return c.leader(n1) == n1 })
	c.start(n2, "--join", n1.http) // this build, through an older leader
	c.start(n3, "--join", n1.http)
	eventually(t, 60*time.Second, "three voters", func() bool {
		s, err := status(n1.http)
		voters := 0
		for _, m := range s.Members {
			if m.Voter {
				voters++
			}
		}
		return err == nil && voters == 3
	})

	// The older build refuses a node of this build nothing, and takes its
	// voucher.
	submitTask(t, n2.http, "via-new-to-old", time.Now().Add(time.Hour))
	var via string
	eventually(t, 20*time.Second, "the write forwarded by n2 is recorded", func() (ok bool) {
		via, ok = auditVia(t, n1.http, "via-new-to-old")
		return ok
	})
	require.Equal(t, n2.id, via, "the older leader took this build's voucher")

	// An older node joining through this build is refused, saying why.
	n4 := &agentProc{id: "n4", raft: freeAddr(t), http: freeAddr(t), data: filepath.Join(c.dir, "n4"), bin: old}
	c.nodes = append(c.nodes, n4)
	c.start(n4, "--join", n2.http)
	done := make(chan error, 1)
	go func() { done <- n4.cmd.Wait() }()
	select {
	case err := <-done:
		require.Error(t, err, "the older node's agent exits")
	case <-time.After(60 * time.Second):
		t.Fatal("the older node's join was not refused")
	}
	logb, err := os.ReadFile(filepath.Join(c.dir, "n4.log"))
	require.NoError(t, err)
	require.Contains(t, string(logb), "upgrade the sending node", tail(string(logb), 20))

	// The leader moves to this build: n1 is upgraded; n3 stays on the
	// older one (if it was elected meanwhile, it is stopped until a node
	// of this build leads, then comes back as a follower).
	c.stop(n1)
	n1.bin = ""
	c.start(n1)
	var lead *agentProc
	eventually(t, 30*time.Second, "a leader", func() bool { lead = c.leader(n1, n2, n3); return lead != nil })
	if lead == n3 {
		c.stop(n3)
		eventually(t, 30*time.Second, "a leader on this build", func() bool { return c.leader(n1, n2) != nil })
		c.start(n3)
	}
	eventually(t, 30*time.Second, "n3 follows", func() bool {
		s, err := status(n3.http)
		return err == nil && s.LeaderID != "" && s.LeaderID != n3.id
	})
	// The older follower's forward carries X-Forwarded-For and a voucher
	// this build does not take: without tokens, the leader cannot tell it
	// from a proxy's, and refuses it (before, it passed as loopback only
	// because all nodes share this machine; from another machine it was
	// refused already).
	key := fmt.Sprintf("via-old-to-new-%d", time.Now().UnixNano())
	body := map[string]any{"key": key, "rule": "remind", "due_at": time.Now().Add(time.Hour).Format(time.RFC3339Nano)}
	var apiErr *cluster.APIError
	eventually(t, 30*time.Second, "the write forwarded by the older n3 is refused", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := (&cluster.Client{Addr: n3.http}).Do(ctx, http.MethodPost, "/v1/tasks", body, nil)
		return errors.As(err, &apiErr) && apiErr.Status == http.StatusForbidden
	})
	require.Contains(t, apiErr.Error(), "X-Forwarded-For")
	lead = c.leader(n1, n2)
	require.NotNil(t, lead)
	_, recorded := auditVia(t, lead.http, key)
	require.False(t, recorded)
	leadLog, err := os.ReadFile(filepath.Join(c.dir, lead.id+".log"))
	require.NoError(t, err)
	require.True(t, strings.Contains(string(leadLog), "older build"), "the leader says why it did not take the voucher")
}
