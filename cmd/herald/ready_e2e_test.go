package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald/engine/api"
)

// probe calls a probe endpoint as a load balancer does: no token.
func probe(addr, path string) (int, api.Readiness, error) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, api.Readiness{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, api.Readiness{}, err
	}
	var rd api.Readiness
	if path == "/v1/ready" {
		err = json.Unmarshal(b, &rd)
	}
	return resp.StatusCode, rd, err
}

// submitAs posts one API task with a token.
func submitAs(addr, token, key string, due time.Time) error {
	body := fmt.Sprintf(`{"key":%q,"rule":"remind","due_at":%q,"data":{"task":%q}}`, key, due.Format(time.RFC3339), key)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/tasks", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("task %s: HTTP %d: %s", key, resp.StatusCode, b)
	}
	return nil
}

// TestReadyWhileJoining: with tokens configured and none sent, /v1/health
// answers 200 and /v1/ready 503 on a node that is joining a cluster with a
// backlog, then 200 once it is a member that caught up. The agent's first
// log line and /v1/status name the build as `herald version` does.
func TestReadyWhileJoining(t *testing.T) {
	c := setupTokenCluster(t)
	require.NoError(t, os.Remove(filepath.Join(c.rules, "tick.lua")))
	require.NoError(t, os.WriteFile(filepath.Join(c.rules, "remind.lua"), []byte(upgradeRemind), 0o644))
	n1, n2 := c.nodes[0], c.nodes[1]
	operate := e2eTokens["HT_OPERATE"]

	c.start(n1, "--bootstrap")
	eventually(t, 20*time.Second, "n1 ready, probed without a token", func() bool {
		code, _, err := probe(n1.http, "/v1/ready")
		return err == nil && code == http.StatusOK
	})
	code, _, err := probe(n1.http, "/v1/health")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	code, _, _ = probe(n1.http, "/v1/status")
	require.Equal(t, http.StatusUnauthorized, code, "tokens are configured: the rest needs one")

	// A backlog beyond cluster.ReadyLag, for n2 to catch up with.
	const backlog = 1200
	due := time.Now().Add(2 * time.Hour)
	var g errgroup.Group
	g.SetLimit(8)
	for i := range backlog {
		g.Go(func() error { return submitAs(n1.http, operate, fmt.Sprintf("backlog-%04d", i), due) })
	}
	require.NoError(t, g.Wait())

	// Probe n2 from before it starts until it is ready.
	var (
		mu      sync.Mutex
		seen    = map[int]int{}
		reasons = map[string]bool{}
		last    api.Readiness
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(60 * time.Second)
		tick := time.NewTicker(5 * time.Millisecond) // a probe's period
		defer tick.Stop()
		for ; time.Now().Before(deadline); <-tick.C {
			code, rd, err := probe(n2.http, "/v1/ready")
			mu.Lock()
			if err == nil {
				seen[code]++
				for _, r := range rd.Reasons {
					check, _, _ := strings.Cut(r, ":")
					reasons[check] = true
				}
				last = rd
			}
			mu.Unlock()
			if err == nil && code == http.StatusOK {
				return
			}
		}
	}()
	c.start(n2, "--join", n1.http)
	<-done
	mu.Lock()
	defer mu.Unlock()
	t.Logf("n2 /v1/ready answers: %v; failed checks seen: %v; final: %+v", seen, reasons, last)
	require.Positive(t, seen[http.StatusServiceUnavailable], "503 while joining")
	require.Equal(t, 1, seen[http.StatusOK], "then 200")
	require.True(t, last.Ready)
	require.Equal(t, api.ReadyChecks{Member: true, Leader: true, CaughtUp: true, Rules: true, Channels: true}, last.Checks)
	require.NotContains(t, fmt.Sprint(reasons), n1.http)

	var st struct {
		Version      string `json:"version"`
		AppliedIndex uint64 `json:"applied_index"`
	}
	require.NoError(t, getAs(n2.http, e2eTokens["HT_READ"], "/v1/status", &st))
	require.Greater(t, st.AppliedIndex, uint64(backlog), "ready means caught up: the backlog is applied")
	out, err := c.cli("version")
	require.NoError(t, err, out)
	require.Equal(t, "herald "+st.Version+"\n", out, "/v1/status names the build as herald version does")
	b, err := os.ReadFile(filepath.Join(c.dir, n2.id+".log"))
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(b), "\n")
	require.Contains(t, first, "herald starting")
	require.Contains(t, first, st.Version, "the agent's first log line")
}
