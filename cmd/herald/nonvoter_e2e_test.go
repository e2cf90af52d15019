package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// suffrageAt is member id's suffrage as the node at addr's /v1/status
// shows it.
func suffrageAt(addr, id string) string {
	var s struct {
		Members []struct {
			ID       string `json:"id"`
			Suffrage string `json:"suffrage"`
		} `json:"members"`
	}
	if err := getJSON(addr, "/v1/status", &s); err != nil {
		return err.Error()
	}
	for _, m := range s.Members {
		if m.ID == id {
			return m.Suffrage
		}
	}
	return ""
}

// Three real agents, n3 a read replica (--non-voter): it serves reads,
// forwards a task that is delivered, is never counted a voter, and
// herald cluster promote makes it one.
func TestNonVoterE2E(t *testing.T) {
	c := setupE2E(t)
	require.NoError(t, os.Remove(filepath.Join(c.rules, "tick.lua")))
	require.NoError(t, os.WriteFile(filepath.Join(c.rules, "remind.lua"), []byte(upgradeRemind), 0o644))
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	c.start(n1, "--bootstrap")
	eventually(t, 20*time.Second, "n1 leads", func() bool { return c.leader(n1) == n1 })
	c.start(n2, "--join", n1.http)
	c.start(n3, "--join", n1.http, "--non-voter")
	eventually(t, 30*time.Second, "n3 a non-voter", func() bool {
		return votersAt(n1.http) == "n1 n2" && suffrageAt(n1.http, "n3") == "nonvoter" && suffrageAt(n3.http, "n3") == "nonvoter"
	})
	out, err := c.cli("cluster", "status", "--addr", n3.http)
	require.NoError(t, err, out)
	require.Contains(t, out, "nonvoter", out)

	submitTask(t, n3.http, "nv-1", time.Now().Add(time.Second)) // forwarded to the leader
	eventually(t, 30*time.Second, "the task sent through the replica delivered", func() bool {
		got, _ := c.delivered()
		return len(got["dave"]) >= 1
	})
	eventually(t, 20*time.Second, "the replica serves what the leader applied", func() bool {
		s1, err1 := status(n1.http)
		s3, err3 := status(n3.http)
		return err1 == nil && err3 == nil && s3.LeaderID == "n1" && s3.AppliedIndex >= s1.AppliedIndex
	})
	require.NotEqual(t, "leader", func() string { s, _ := status(n3.http); return s.State }())

	out, err = c.cli("cluster", "promote", "n3", "--addr", n3.http)
	require.NoError(t, err, out)
	require.Contains(t, out, "n3 is a voter")
	eventually(t, 20*time.Second, "n3 a voter", func() bool {
		return votersAt(n1.http) == "n1 n2 n3" && suffrageAt(n3.http, "n3") == "voter"
	})
	out, err = c.cli("cluster", "promote", "n3", "--addr", n2.http)
	require.Error(t, err, out)
	require.Contains(t, out, "already a voter")
}
