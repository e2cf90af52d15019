package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/engine/api"
)

// The secret the secure e2e cluster shares, passed by ${ENV} reference.
const e2eSecret = "e2e-cluster-secret-7f3a9c1d0b2e4f68"

// The secure cluster's tokens: variable → value.
var secureTokens = map[string]string{
	"HS_READ":    "hs-read-5e1c7a9b3d2f4068",
	"HS_OPERATE": "hs-operate-8b0d2f4a6c1e3957",
	"HS_ADMIN":   "hs-admin-2a9c4e6b8d0f1735",
}

// remindRule has no schedule: API tasks fire it.
const remindRule = `return rule {
  name     = "remind",
  timezone = "Asia/Shanghai",
  channel  = "mock",
  recipients = function(run) return { "carol" } end,
  message = function(run, to) return { msgtype = "text", content = "remind" } end,
}
`

// startEnv starts an agent like start, with extra environment variables.
func (c *e2eCluster) startEnv(n *agentProc, env []string, extra ...string) {
	c.t.Helper()
	args := append([]string{"agent", "--config", c.config, "--node-id", n.id, "--data-dir", n.data,
		"--raft-addr", n.raft, "--http-addr", n.http, "--rules", c.rules, "--log-level", "info"}, extra...)
	cmd := exec.Command(heraldBin, args...)
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.OpenFile(filepath.Join(c.dir, n.id+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(c.t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(c.t, cmd.Start())
	n.cmd, n.log = cmd, logf
}

// waitExit waits for an agent expected to stop on its own and returns its
// exit code.
func (c *e2eCluster) waitExit(n *agentProc, within time.Duration) int {
	c.t.Helper()
	done := make(chan error, 1)
	go func() { done <- n.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(within):
		c.t.Fatalf("%s did not exit within %s", n.id, within)
	}
	return n.cmd.ProcessState.ExitCode()
}

func (c *e2eCluster) logOf(n *agentProc) string {
	b, err := os.ReadFile(filepath.Join(c.dir, n.id+".log"))
	require.NoError(c.t, err)
	return string(b)
}

// tlsFlags are a node's --tls-* flags for certificates in dir.
func tlsFlags(dir, node string) []string {
	return []string{"--tls-cert", filepath.Join(dir, node+".pem"), "--tls-key", filepath.Join(dir, node+"-key.pem"),
		"--tls-ca", filepath.Join(dir, "ca.pem")}
}

// secureStatus asks a TLS node for /v1/cluster/status, trusting ca, with
// the read token.
func secureStatus(addr, ca string) (cluster.Status, error) {
	c, err := newAPIClient(addr, ca, 2*time.Second)
	if err != nil {
		return cluster.Status{}, err
	}
	c.Token = secureTokens["HS_READ"]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Status(ctx)
}

func voters(st cluster.Status) []string {
	var ids []string
	for _, m := range st.Members {
		if m.Voter {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// A three-node cluster with TLS, a cluster secret and tokens: strangers
// cannot join (no token, no secret, a wrong one, another CA's
// certificate), cannot talk Raft, plain HTTP gets no API answer, each role
// gets what it may, the rogue takeover of issue 8 fails at its first step,
// and neither key material, the secret nor a token shows in status,
// metrics, logs or errors.
func TestSecureCluster(t *testing.T) {
	c := setupE2E(t)
	tlsDir, rogueDir := filepath.Join(c.dir, "tls"), filepath.Join(c.dir, "rogue-tls")
	out, err := c.cli("tls", "init", "--dir", tlsDir, "--nodes", "n1,n2,n3", "--shared-hosts", "127.0.0.1,localhost")
	require.NoError(t, err, out)
	require.Contains(t, out, "wrote "+filepath.Join(tlsDir, "ca.pem"))
	out, err = c.cli("tls", "init", "--dir", rogueDir, "--nodes", "evil")
	require.NoError(t, err, out)
	ca := filepath.Join(tlsDir, "ca.pem")

	require.NoError(t, os.WriteFile(filepath.Join(c.rules, "remind.lua"), []byte(remindRule), 0o644))
	base, err := os.ReadFile(c.config)
	require.NoError(t, err)
	strangerConfig := filepath.Join(c.dir, "stranger.yaml") // no tokens: a stranger has none
	require.NoError(t, os.WriteFile(strangerConfig, base, 0o644))
	require.NoError(t, os.WriteFile(c.config, append(base, []byte("tokens:\n"+
		"  - {name: dashboard, role: read, token: \"${HS_READ}\"}\n"+
		"  - {name: ops, role: operate, token: \"${HS_OPERATE}\"}\n"+
		"  - {name: root, role: admin, token: \"${HS_ADMIN}\"}\n")...), 0o644))
	env := []string{"HERALD_E2E_SECRET=" + e2eSecret}
	for k, v := range secureTokens {
		env = append(env, k+"="+v)
	}
	cliAs := func(token string, args ...string) (string, error) {
		cmd := exec.Command(heraldBin, args...)
		cmd.Env = append(os.Environ(), "HERALD_TOKEN="+token)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	read, operate, admin := secureTokens["HS_READ"], secureTokens["HS_OPERATE"], secureTokens["HS_ADMIN"]
	secret := []string{"--cluster-secret", "${HERALD_E2E_SECRET}"}
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	c.startEnv(n1, env, append(append(tlsFlags(tlsDir, "n1"), secret...), "--bootstrap", "--peers", n2.http+","+n3.http)...)
	eventually(t, 30*time.Second, "n1 leads", func() bool {
		st, err := secureStatus(n1.http, ca)
		return err == nil && st.State == "leader"
	})
	for _, n := range []*agentProc{n2, n3} {
		c.startEnv(n, env, append(append(tlsFlags(tlsDir, n.id), secret...), "--join", n1.http)...)
	}
	eventually(t, 30*time.Second, "three voters", func() bool {
		st, err := secureStatus(n3.http, ca)
		return err == nil && len(voters(st)) == 3 && st.LeaderID != ""
	})
	eventually(t, 30*time.Second, "every member record says https", func() bool {
		st, err := secureStatus(n2.http, ca)
		if err != nil || len(st.Members) != 3 {
			return false
		}
		for _, m := range st.Members {
			if !strings.HasPrefix(m.HTTPAddr, "https://") {
				return false
			}
		}
		return true
	})
	eventually(t, 30*time.Second, "slots delivered over the TLS cluster", func() bool { return c.slotsDelivered() >= 2 })

	// The CLI with --ca, with and without a scheme.
	out, err = cliAs(read, "cluster", "status", "--addr", "https://"+n2.http, "--ca", ca)
	require.NoError(t, err, out)
	require.Contains(t, out, "https://"+n1.http)
	out, err = cliAs(read, "cluster", "status", "--addr", n2.http, "--ca", ca)
	require.NoError(t, err, out)
	// Without the CA the node's certificate is not trusted.
	out, err = cliAs(read, "cluster", "status", "--addr", "https://"+n2.http)
	require.Error(t, err, out)
	require.Contains(t, out, "certificate")

	// Plain HTTP to the TLS port gets no API answer.
	resp, err := http.Get("http://" + n1.http + "/v1/status")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.NotContains(t, string(body), "node_id")
	require.Contains(t, string(body), "HTTPS")
	out, err = cliAs(read, "cluster", "status", "--addr", n2.http)
	require.Error(t, err)
	require.Contains(t, out, "--ca")

	// Roles, over HTTPS, through a follower and at the leader.
	due := time.Now().Add(time.Hour).Format(time.RFC3339)
	submit := func(token, key string, via *agentProc) (string, error) {
		return cliAs(token, "task", "submit", key, "--rule", "remind", "--due", due, "--addr", via.http, "--ca", ca)
	}
	for _, via := range []*agentProc{n1, n2} {
		out, err = submit("", "k-"+via.id, via)
		require.Error(t, err, out)
		require.Contains(t, out, "HTTP 401", out)
		out, err = submit(read, "k-"+via.id, via)
		require.Error(t, err, out)
		require.Contains(t, out, "HTTP 403", out)
		out, err = submit(operate, "k-"+via.id, via)
		require.NoError(t, err, out)
	}
	out, err = cliAs(operate, "task", "get", "k-n2", "--addr", n3.http, "--ca", ca)
	require.NoError(t, err, out)
	out, err = cliAs(operate, "cluster", "remove", n3.id, "--addr", n2.http, "--ca", ca)
	require.Error(t, err, out)
	require.Contains(t, out, "HTTP 403", out)

	// The audit trail: each accepted submit once, under its token's name;
	// the one sent to a follower names the client and the follower it came
	// through (vouched for with the cluster secret), not the follower as
	// the client. The refused ones are not there. Reading it takes admin.
	audit := func(token string, via *agentProc, args ...string) (string, error) {
		return cliAs(token, append([]string{"audit", "--addr", via.http, "--ca", ca}, args...)...)
	}
	var trail api.AuditResponse
	eventually(t, 30*time.Second, "both submits in the trail, on a third node", func() bool {
		out, err := audit(admin, n3, "--json", "--action", "task.submit")
		if err != nil || json.Unmarshal([]byte(out), &trail) != nil {
			return false
		}
		return len(trail.Records) >= 2
	})
	byKey := map[string][]api.AuditView{}
	for _, r := range trail.Records {
		byKey[r.Target] = append(byKey[r.Target], r)
	}
	forwarded := 0
	for _, via := range []*agentProc{n1, n2} {
		recs := byKey["k-"+via.id]
		require.Len(t, recs, 1, "one record per accepted write, none for the refused: %+v", trail.Records)
		r := recs[0]
		require.Equal(t, "ops", r.Actor)
		require.Equal(t, "operate", r.Role)
		require.Equal(t, "127.0.0.1", r.Remote)
		require.Equal(t, 201, r.Status)
		if r.Node != via.id {
			require.Equal(t, via.id, r.Via, "forwarded by %s to %s: the client's write, through %s", via.id, r.Node, via.id)
			forwarded++
		} else {
			require.Empty(t, r.Via)
		}
	}
	require.Equal(t, 1, forwarded, "one of the two was sent to a follower (unless leadership moved between them)")
	for _, token := range []string{read, operate} {
		out, err = audit(token, n2)
		require.Error(t, err, out)
		require.Contains(t, out, "HTTP 403", out)
	}
	out, err = audit(admin, n2, "--limit", "1", "--tz", "Asia/Shanghai")
	require.NoError(t, err, out)
	require.Contains(t, out, "TIME (Asia/Shanghai)")
	require.Contains(t, out, "+08:00")
	require.Contains(t, out, "more: herald audit --cursor ")
	auditSeen := out

	// The rogue takeover of issue 8, step one: a stranger runs an agent
	// and joins through a member. Every variant fails there, and the agent
	// exits with the reason.
	rogue := func(id, config string, extra ...string) (int, string) {
		n := &agentProc{id: id, raft: freeAddr(t), http: freeAddr(t), data: filepath.Join(c.dir, id)}
		c.nodes = append(c.nodes, n)
		c.startEnv(n, append(env, "HERALD_E2E_WRONG=wrong-secret-0123456789abcdef"),
			append(extra, "--config", config, "--join", n2.http, "--join-timeout", "5s")...)
		return c.waitExit(n, 60*time.Second), c.logOf(n)
	}
	_, err = cluster.InitTLS(tlsDir, []string{"stolen"}, nil, []string{"127.0.0.1"}, time.Now())
	require.NoError(t, err) // a certificate of the right CA, as if stolen
	// A stranger with a certificate of the right CA, but no token and no
	// secret: 401.
	code, log := rogue("stolen", strangerConfig, tlsFlags(tlsDir, "stolen")...)
	require.Equal(t, 1, code, log)
	require.Contains(t, log, "HTTP 401")
	// Even holding an admin token (a copied config), no secret: 403.
	code, log = rogue("insider", c.config, tlsFlags(tlsDir, "stolen")...)
	require.Equal(t, 1, code, log)
	require.Contains(t, log, "HTTP 403")
	require.Contains(t, log, "requires cluster_secret")
	code, log = rogue("wrongsecret", c.config, append(tlsFlags(tlsDir, "stolen"), "--cluster-secret", "${HERALD_E2E_WRONG}")...)
	require.Equal(t, 1, code, log)
	require.Contains(t, log, "HTTP 403")
	require.Contains(t, log, "differs")
	code, log = rogue("evil", c.config, append(tlsFlags(rogueDir, "evil"), secret...)...)
	require.Equal(t, 1, code, log)
	require.Contains(t, log, "certificate")
	code, log = rogue("plain", strangerConfig)
	require.Equal(t, 1, code, log)
	// Step two of the takeover, for the record: remove a member without
	// the admin token.
	out, err = cliAs("", "cluster", "remove", n3.id, "--addr", n1.http, "--ca", ca)
	require.Error(t, err, out)
	require.Contains(t, out, "HTTP 401", out)

	// Straight at a member's Raft port with the other CA's certificate,
	// and with none: the handshake fails.
	evil, err := cluster.NewCertStore(cluster.TLSFiles{Cert: filepath.Join(rogueDir, "evil.pem"),
		Key: filepath.Join(rogueDir, "evil-key.pem"), CA: filepath.Join(rogueDir, "ca.pem")}, nil)
	require.NoError(t, err)
	require.Error(t, raftHandshake(n1.raft, evil.RaftConfig()))
	require.Error(t, raftHandshake(n1.raft, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})) //nolint:gosec // a client without a certificate
	plain, err := net.DialTimeout("tcp", n1.raft, 2*time.Second)
	require.NoError(t, err)
	_, _ = plain.Write([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	require.NoError(t, plain.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = plain.Read(make([]byte, 1))
	plain.Close()
	require.Error(t, err, "plain Raft gets nothing back")

	// An operator's `herald cluster join` proves the secret from
	// HERALD_CLUSTER_SECRET; without it the cluster refuses.
	joinArgs := []string{"cluster", "join", "--addr", n2.http, "--ca", ca, "--id", "n9", "--raft-addr", freeAddr(t), "--http-addr", freeAddr(t), "--timeout", "10s"}
	out, err = cliAs(admin, joinArgs...)
	require.Error(t, err, out)
	require.Contains(t, out, "requires cluster_secret")
	cmd := exec.Command(heraldBin, joinArgs...)
	cmd.Env = append(os.Environ(), "HERALD_CLUSTER_SECRET="+e2eSecret, "HERALD_TOKEN="+admin)
	b, err := cmd.CombinedOutput()
	require.Error(t, err, string(b))
	require.Contains(t, string(b), "raft address does not answer", "past the secret check, to the probe of n9's Raft address")

	st, err := secureStatus(n1.http, ca)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"n1", "n2", "n3"}, voters(st), "no stranger became a member")

	// Nothing secret in what the nodes show or log.
	var seen strings.Builder
	for _, path := range []string{"/v1/status", "/metrics", "/v1/cluster/status"} {
		cl, err := newAPIClient(n1.http, ca, 5*time.Second)
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://"+n1.http+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+read)
		resp, err := cl.HTTP.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		seen.Write(b)
	}
	out, err = audit(admin, n1, "--json", "--limit", "1000")
	require.NoError(t, err, out)
	seen.WriteString(out)
	seen.WriteString(auditSeen)
	c.stopAll()
	for _, n := range c.nodes {
		seen.WriteString(c.logOf(n))
	}
	requireNoSecrets(t, seen.String(), e2eSecret, "wrong-secret-0123456789abcdef", read, operate, admin,
		filepath.Join(tlsDir, "ca-key.pem"), filepath.Join(tlsDir, "n1-key.pem"), filepath.Join(tlsDir, "n2-key.pem"),
		filepath.Join(tlsDir, "n3-key.pem"), filepath.Join(tlsDir, "stolen-key.pem"), filepath.Join(rogueDir, "evil-key.pem"))
}

// requireNoSecrets fails if text holds a secret or any line of the body
// of a PEM key file.
func requireNoSecrets(t *testing.T, text string, secretsAndKeyFiles ...string) {
	t.Helper()
	require.NotContains(t, text, "PRIVATE KEY")
	for _, s := range secretsAndKeyFiles {
		if !strings.HasSuffix(s, ".pem") {
			require.NotContains(t, text, s)
			continue
		}
		b, err := os.ReadFile(s)
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
				require.NotContains(t, text, line, "a line of %s", filepath.Base(s))
			}
		}
	}
}

// raftHandshake dials a Raft port with conf and reads once: mutual TLS
// refuses a wrong client certificate only after the client's handshake
// returned (TLS 1.3), at the first read.
func raftHandshake(addr string, conf *tls.Config) error {
	d := &net.Dialer{Timeout: 2 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, conf)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	_, err = c.Read(make([]byte, 1))
	if err == nil {
		return fmt.Errorf("the Raft port answered")
	}
	return err
}

// A member's data dir is wiped and it is restarted with its original
// --bootstrap: it rejoins the live cluster as the same member (same
// cluster id, the cluster's state), first while it was the leader, then
// while it was a follower; and it restarts normally afterwards.
func TestWipedBootstrapNodeE2E(t *testing.T) {
	c := setupE2E(t)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	c.start(n1, "--bootstrap")
	eventually(t, 20*time.Second, "n1 leads", func() bool { return c.leader(n1) == n1 })
	c.start(n2, "--join", n1.http)
	c.start(n3, "--join", n1.http)
	clusterID := func(n *agentProc) string {
		var st cluster.Status
		if getJSON(n.http, "/v1/cluster/status", &st) != nil {
			return ""
		}
		return st.ClusterID
	}
	eventually(t, 30*time.Second, "three voters", func() bool {
		var st cluster.Status
		return getJSON(n3.http, "/v1/cluster/status", &st) == nil && len(voters(st)) == 3
	})
	var id string
	eventually(t, 10*time.Second, "n2 knows the cluster id", func() bool { id = clusterID(n2); return id != "" })
	eventually(t, 30*time.Second, "slots delivered", func() bool { return c.slotsDelivered() >= 2 })

	for round, wasLeader := range []bool{true, false} {
		if wasLeader {
			require.Equal(t, n1, c.leader(n1, n2, n3), "n1 bootstrapped and leads")
		} else {
			eventually(t, 20*time.Second, "n1 follows", func() bool {
				s, err := status(n1.http)
				return err == nil && s.State == "follower" && s.LeaderID != ""
			})
		}
		c.kill(n1)
		require.NoError(t, os.RemoveAll(n1.data))
		c.start(n1, "--bootstrap")
		eventually(t, 40*time.Second, fmt.Sprintf("round %d: wiped n1 back in cluster %s", round, id), func() bool {
			s, err := status(n1.http)
			return err == nil && s.State == "follower" && s.LeaderID != "" && clusterID(n1) == id
		})
		lead := c.leader(n2, n3)
		require.NotNil(t, lead)
		ls, err := status(lead.http)
		require.NoError(t, err)
		eventually(t, 30*time.Second, "n1 caught up", func() bool {
			s, err := status(n1.http)
			return err == nil && s.AppliedIndex >= ls.AppliedIndex
		})
		require.Contains(t, c.logOf(n1), "following it instead of bootstrapping")
	}
	// The next restart (with data) is an ordinary one, not "another cluster".
	require.NoError(t, n1.cmd.Process.Signal(os.Interrupt))
	_ = n1.cmd.Wait()
	c.start(n1, "--bootstrap")
	eventually(t, 30*time.Second, "n1 restarts normally", func() bool {
		s, err := status(n1.http)
		return err == nil && s.LeaderID != "" && clusterID(n1) == id
	})
	var st cluster.Status
	require.NoError(t, getJSON(n2.http, "/v1/cluster/status", &st))
	require.ElementsMatch(t, []string{"n1", "n2", "n3"}, voters(st))
	require.NotContains(t, c.logOf(n1), "another cluster")
	before := c.slotsDelivered()
	eventually(t, 30*time.Second, "slots still delivered", func() bool { return c.slotsDelivered() >= before+2 })
	c.requireEachSlotOnce()
}
