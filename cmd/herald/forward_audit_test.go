package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// machineAddr is an address of this machine other than loopback, as a
// member on another machine would see this one; "" when it has none.
func machineAddr(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP.String()
		}
	}
	return ""
}

func freeAddrOn(t *testing.T, host string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// Without tokens, across machines: the leader (n1) serves its API on a
// network address, n2 on loopback only. A write n2 takes from its own
// machine reaches the leader from n2's network address, which is not
// loopback: with the cluster secret, n2 vouches for it, the leader accepts
// it and records it as loopback's, via n2, from 127.0.0.1. A write sent to
// the leader's network address from the same machine is not loopback and
// is refused, as the README says. n2's join is recorded too.
func TestLoopbackWriteVouchedAcrossMachines(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster; skipped with -short")
	}
	ip := machineAddr(t)
	if ip == "" {
		t.Skip("this machine has no address but loopback: nothing to forward across")
	}
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules")
	require.NoError(t, os.MkdirAll(rules, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(rules, "remind.lua"), []byte(remindRule), 0o644))
	channels := map[string]map[string]any{"mock": {"plugin": "mock", "outbox": filepath.Join(dir, "outbox.jsonl")}}
	log := newLogger("error")
	start := func(cfg nodeConfig) *node {
		cfg.DataDir, cfg.Rules, cfg.Channels = filepath.Join(dir, cfg.NodeID), rules, channels
		cfg.clusterSecret, cfg.devTimeouts, cfg.raftLogLevel = "a-cluster-secret-for-the-forward-test", true, "error"
		n, err := startNode(context.Background(), cfg, log.With("node", cfg.NodeID))
		require.NoError(t, err)
		t.Cleanup(n.stop)
		return n
	}
	n1 := start(nodeConfig{NodeID: "n1", RaftAddr: freeAddrOn(t, ip), HTTPAddr: freeAddrOn(t, ip), Bootstrap: true})
	eventually(t, 20*time.Second, "n1 leads", n1.raft.IsLeader)
	n2 := start(nodeConfig{NodeID: "n2", RaftAddr: freeAddrOn(t, ip), HTTPAddr: freeAddr(t), Join: n1.cfg.HTTPAddr})
	eventually(t, 20*time.Second, "n2 holds both member records", func() bool { return len(n2.fsm.Members()) == 2 })

	post := func(addr, key string) (int, string) {
		body := `{"key":"` + key + `","rule":"remind","due_at":"` + time.Now().Add(time.Hour).Format(time.RFC3339) + `"}`
		resp, err := http.Post("http://"+addr+"/v1/tasks", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp.StatusCode, b.String()
	}
	code, body := post(n2.cfg.HTTPAddr, "through-n2")
	require.Equal(t, http.StatusCreated, code, body)
	submits := engine.AuditQuery{Limit: 10, Action: "task.submit"}
	eventually(t, 10*time.Second, "the record", func() bool { return len(n1.fsm.Audit(submits).Records) == 1 })
	r := n1.fsm.Audit(submits).Records[0]
	require.Equal(t, []string{"loopback", "admin", "127.0.0.1", "n2", "task.submit", "through-n2", "n1"},
		[]string{r.Actor, r.Role, r.Remote, r.Via, r.Action, r.Target, r.Node})

	code, body = post(n1.cfg.HTTPAddr, "straight")
	require.Equal(t, http.StatusUnauthorized, code, body)
	require.Contains(t, body, "loopback")

	// n2's join is in the trail too: proven by the cluster secret.
	joins := n1.fsm.Audit(engine.AuditQuery{Limit: 10, Action: "cluster.join"}).Records
	require.Len(t, joins, 1)
	require.Equal(t, []string{"peer", "n2"}, []string{joins[0].Actor, joins[0].Target})
}
