package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/cluster"
)

// Token values of the tokens e2e test: searched for in every output.
var e2eTokens = map[string]string{
	"HT_READ":    "read-7f3a9c1e5b2d4f60",
	"HT_OPERATE": "operate-0c8e2a4b6d1f3957",
	"HT_ADMIN":   "admin-9d2b7e4c1a6f8035",
}

// tokenCluster is three agents sharing one config with tokens.
type tokenCluster struct {
	*e2eCluster
	env []string
}

func setupTokenCluster(t *testing.T) *tokenCluster {
	c := setupE2E(t)
	cfg := "channels:\n  mock:\n    plugin: mock\n    outbox: " + c.outbox + "\n" +
		"tokens:\n" +
		"  - {name: dashboard, role: read, token: \"${HT_READ}\"}\n" +
		"  - {name: ops, role: operate, token: \"${HT_OPERATE}\"}\n" +
		"  - {name: root, role: admin, token: \"${HT_ADMIN}\"}\n"
	require.NoError(t, os.WriteFile(c.config, []byte(cfg), 0o644))
	env := os.Environ()
	for k, v := range e2eTokens {
		env = append(env, k+"="+v)
	}
	return &tokenCluster{e2eCluster: c, env: env}
}

func (c *tokenCluster) start(n *agentProc, extra ...string) {
	c.t.Helper()
	args := append([]string{"agent", "--config", c.config, "--node-id", n.id, "--data-dir", n.data,
		"--raft-addr", n.raft, "--http-addr", n.http, "--rules", c.rules, "--log-level", "debug"}, extra...)
	cmd := exec.Command(heraldBin, args...)
	cmd.Env = c.env
	logf, err := os.OpenFile(filepath.Join(c.dir, n.id+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(c.t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(c.t, cmd.Start())
	n.cmd, n.log = cmd, logf
}

// cliAs runs the herald CLI with HERALD_TOKEN set to token ("" for none).
func (c *tokenCluster) cliAs(token string, args ...string) (string, error) {
	cmd := exec.Command(heraldBin, args...)
	cmd.Env = append(os.Environ(), "HERALD_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func getAs(addr, token, path string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return (&cluster.Client{Addr: addr, Token: token}).Do(ctx, http.MethodGet, path, nil, out)
}

func apiStatus(err error) int {
	var ae *cluster.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// TestTokensAcrossTheCluster runs three real agents with tokens: nodes
// join and ask each other with their own token; a follower forwards a
// caller's identity, never its own power; each role gets what it may.
func TestTokensAcrossTheCluster(t *testing.T) {
	c := setupTokenCluster(t)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	read, operate, admin := e2eTokens["HT_READ"], e2eTokens["HT_OPERATE"], e2eTokens["HT_ADMIN"]
	c.start(n1, "--bootstrap")
	eventually(t, 20*time.Second, "n1 leads", func() bool {
		var s statusView
		return getAs(n1.http, read, "/v1/status", &s) == nil && s.State == "leader"
	})
	c.start(n2, "--join", n1.http)
	c.start(n3, "--join", n2.http) // through a follower: forwarded to the leader
	var st statusView
	eventually(t, 30*time.Second, "three voters, joined with the nodes' own token", func() bool {
		voters := 0
		err := getAs(n3.http, read, "/v1/status", &st)
		for _, m := range st.Members {
			if m.Voter {
				voters++
			}
		}
		return err == nil && voters == 3 && st.LeaderID == n1.id
	})

	// Reads: no token → 401; a read token everywhere.
	require.Equal(t, http.StatusUnauthorized, apiStatus(getAs(n2.http, "", "/v1/status", &st)))
	require.Equal(t, http.StatusUnauthorized, apiStatus(getAs(n2.http, "wrong-token-value-123", "/v1/tasks", &st)))
	var hashes struct {
		Members []struct {
			ID        string `json:"id"`
			RulesHash string `json:"rules_hash"`
		} `json:"members"`
		RulesMismatch bool `json:"rules_mismatch"`
	}
	// n2 asks the others for their rule sets with its own token.
	eventually(t, 20*time.Second, "n2 sees every member's rule set hash", func() bool {
		if getAs(n2.http, read, "/v1/status", &hashes) != nil || len(hashes.Members) != 3 {
			return false
		}
		for _, m := range hashes.Members {
			if m.RulesHash == "" {
				return false
			}
		}
		return true
	})
	require.False(t, hashes.RulesMismatch)

	due := time.Now().Add(time.Hour).Format(time.RFC3339)
	submit := func(token, key string, via *agentProc) (string, error) {
		return c.cliAs(token, "task", "submit", key, "--rule", "none_such", "--due", due, "--addr", via.http)
	}
	// Through a follower (n2 forwards writes to n1): the follower refuses
	// what the caller may not do, and forwards the caller's token.
	out, err := submit("", "k1", n2)
	require.Error(t, err)
	require.Contains(t, out, "HTTP 401", out)
	out, err = submit(read, "k1", n2)
	require.Error(t, err)
	require.Contains(t, out, "HTTP 403", out)
	require.Contains(t, out, "token dashboard has role read", out)
	// operate passes the role check; the leader then refuses the unknown
	// rule with 400: the write was checked and forwarded.
	out, err = submit(operate, "k1", n2)
	require.Error(t, err)
	require.Contains(t, out, "HTTP 400", out)
	require.Contains(t, out, "none_such", out)

	// Membership: operate may not remove; admin may (through a follower).
	out, err = c.cliAs(operate, "cluster", "remove", n3.id, "--addr", n2.http)
	require.Error(t, err)
	require.Contains(t, out, "HTTP 403", out)
	out, err = c.cliAs("", "cluster", "remove", n3.id, "--addr", n2.http)
	require.Error(t, err)
	require.Contains(t, out, "HTTP 401", out)

	// A stranger with no token cannot join (the first step of the takeover).
	evil := &agentProc{id: "evil", raft: freeAddr(t), http: freeAddr(t), data: filepath.Join(c.dir, "evil")}
	ev := exec.Command(heraldBin, "agent", "--node-id", evil.id, "--data-dir", evil.data, "--raft-addr", evil.raft,
		"--http-addr", evil.http, "--join", n2.http, "--join-timeout", "5s")
	evOut, err := ev.CombinedOutput()
	require.Error(t, err, "the stranger's agent fails to join")
	require.Contains(t, string(evOut), "HTTP 401", string(evOut))
	require.NoError(t, getAs(n1.http, read, "/v1/status", &st))
	for _, m := range st.Members {
		require.NotEqual(t, "evil", m.ID)
	}

	out, err = c.cliAs(admin, "cluster", "remove", n3.id, "--addr", n2.http)
	require.NoError(t, err, out)
	eventually(t, 20*time.Second, "n3 removed", func() bool {
		if getAs(n1.http, read, "/v1/status", &st) != nil {
			return false
		}
		for _, m := range st.Members {
			if m.ID == n3.id {
				return false
			}
		}
		return true
	})

	// No token value appears in status, metrics, the CLI's errors or logs.
	var metrics strings.Builder
	for _, n := range []*agentProc{n1, n2} {
		req, err := http.NewRequest(http.MethodGet, "http://"+n.http+"/metrics", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+read)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		metrics.Write(b)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var raw map[string]any
		require.NoError(t, getAs(n.http, read, "/v1/status", &raw))
		metrics.WriteString(fmt.Sprint(raw))
	}
	c.stopAll()
	var logs strings.Builder
	for _, n := range c.nodes {
		b, err := os.ReadFile(filepath.Join(c.dir, n.id+".log"))
		require.NoError(t, err)
		logs.Write(b)
	}
	require.Contains(t, logs.String(), "joined the cluster")
	for name, v := range e2eTokens {
		require.NotContains(t, metrics.String(), v, "%s in /metrics or /v1/status", name)
		require.NotContains(t, logs.String(), v, "%s in a log", name)
		require.NotContains(t, string(evOut), v, "%s in the stranger's output", name)
	}
}
