package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runAgent runs `herald agent` to completion (it is expected to fail) and
// returns its exit code and output.
func runAgent(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(heraldBin, append([]string{"agent"}, args...)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	require.NotContains(t, string(out), "panic", "bad input must never panic")
	return code, string(out)
}

func TestAgentBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the herald binary")
	}
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { busy.Close() }) // the subtests run after this function returns
	node := func(extra ...string) []string {
		return append([]string{"--node-id", "n1", "--data-dir", t.TempDir(), "--raft-addr", freeAddr(t), "--http-addr", freeAddr(t)}, extra...)
	}

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"malformed YAML", node("--config", write("bad.yaml", "node_id: [oops\n")), "config"},
		{"unknown config key", node("--config", write("typo.yaml", "nodeid: n1\n")), "field nodeid not found"},
		{"channel without plugin", node("--config", write("ch.yaml", "channels:\n  x: {outbox: o}\n")), `channel "x": plugin is required`},
		{"missing flags", []string{"--node-id", "n1"}, "required"},
		{"bootstrap and join", node("--bootstrap", "--join", "127.0.0.1:1"), "not both"},
		{"http port in use", append(node("--bootstrap"), "--http-addr", busy.Addr().String()), "already in use"},
		{"raft port in use", append(node("--bootstrap"), "--raft-addr", busy.Addr().String()), "in use"},
		{"join where nothing listens", node("--join", freeAddr(t), "--join-timeout", "2s"), "no Herald node at"},
		{"bad join timeout", node("--join-timeout", "soon"), "join_timeout"},
		{"tls cert without key and ca", node("--tls-cert", "n1.pem"), "tls_cert, tls_key and tls_ca go together"},
		{"tls files missing", node("--tls-cert", "x.pem", "--tls-key", "x-key.pem", "--tls-ca", "ca.pem"), "no such file"},
		{"literal cluster secret", node("--cluster-secret", "hunter2hunter2hunter2"), "must be a ${ENV} reference"},
		{"cluster secret variable unset", node("--cluster-secret", "${HERALD_TEST_UNSET_SECRET}"), "HERALD_TEST_UNSET_SECRET}, which is not set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out := runAgent(t, tc.args...)
			require.Equal(t, 1, code, out)
			require.Contains(t, out, tc.want)
			require.True(t, strings.HasPrefix(strings.TrimSpace(lastLine(out)), "herald:"), "the error is the last line: %q", out)
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestRulesCheckRefusesBadCron(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the herald binary")
	}
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.lua"), []byte(strings.Replace(tickRule, `"* * * * * *"`, `"61 * * * *"`, 1)), 0o644))
	out, err := exec.Command(heraldBin, "rules", "check", dir).CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 1, ee.ExitCode())
	require.Contains(t, string(out), "bad.lua:3:")
	require.NotContains(t, string(out), "panic")
}

// A single node: an edit changes what it sends; a broken edit keeps the
// last good version running and shows the error in /v1/status.
func TestHotReloadThroughStatus(t *testing.T) {
	c := setupE2E(t)
	n := c.nodes[0]
	c.start(n, "--bootstrap")
	eventually(t, 30*time.Second, "the first message", func() bool { return c.slotsDelivered() > 0 })

	rule := filepath.Join(c.rules, "tick.lua")
	edited := strings.Replace(tickRule, `content = run.slot`, `content = "v2 " .. run.slot`, 1)
	require.NoError(t, os.WriteFile(rule, []byte(edited), 0o644))
	eventually(t, 30*time.Second, "a message of the edited rule", func() bool { return c.outboxHas(`"v2 `) })

	require.NoError(t, os.WriteFile(rule, []byte(strings.Replace(edited, "recipients =", "recipients = = ", 1)), 0o644))
	eventually(t, 30*time.Second, "the error in /v1/status", func() bool {
		s, err := fullStatus(n.http)
		return err == nil && len(s.Rules) == 1 && s.Rules[0].File == "tick.lua" && s.Rules[0].Error != ""
	})
	s, _ := fullStatus(n.http)
	t.Logf("rule status after a broken edit: %+v", s.Rules)
	count := c.countOutbox(`"v2 `)
	eventually(t, 30*time.Second, "the last good version still sending", func() bool { return c.countOutbox(`"v2 `) >= count+4 })
}

type fullStatusView struct {
	Rules []struct {
		Name, File, Hash, Error string
	} `json:"rules"`
}

func fullStatus(addr string) (fullStatusView, error) {
	var s fullStatusView
	err := getJSON(addr, "/v1/status", &s)
	return s, err
}

func (c *e2eCluster) outboxHas(s string) bool { return c.countOutbox(s) > 0 }

func (c *e2eCluster) countOutbox(s string) int {
	b, _ := os.ReadFile(c.outbox)
	return strings.Count(string(b), s)
}

// Nodes whose rules directories differ are flagged in /v1/status.
func TestStatusFlagsDifferentRuleSets(t *testing.T) {
	c := setupE2E(t)
	n1, n2 := c.nodes[0], c.nodes[1]
	c.start(n1, "--bootstrap")
	other := filepath.Join(c.dir, "other-rules")
	require.NoError(t, os.MkdirAll(other, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, "tick.lua"), []byte(strings.Replace(tickRule, "run.slot", `"other " .. run.slot`, 1)), 0o644))
	c.start(n2, "--join", n1.http, "--rules", other) // the later --rules wins
	var s struct {
		RulesHash     string `json:"rules_hash"`
		RulesMismatch bool   `json:"rules_mismatch"`
		Members       []struct {
			ID        string `json:"id"`
			RulesHash string `json:"rules_hash"`
		} `json:"members"`
	}
	eventually(t, 30*time.Second, "the mismatch flagged", func() bool {
		return getJSON(n1.http, "/v1/status", &s) == nil && s.RulesMismatch
	})
	require.Len(t, s.Members, 2)
	require.NotEqual(t, s.Members[0].RulesHash, s.Members[1].RulesHash)
	require.NotEmpty(t, s.Members[0].RulesHash)
	require.NotEmpty(t, s.Members[1].RulesHash)
}

// A rule file rewritten 100 times in a burst while it fires every second:
// the node ends on the last content, and no slot is missed or sent twice.
func TestReloadStormKeepsFiring(t *testing.T) {
	c := setupE2E(t)
	n := c.nodes[0]
	c.start(n, "--bootstrap")
	eventually(t, 30*time.Second, "the first message", func() bool { return c.slotsDelivered() > 0 })
	rule := filepath.Join(c.rules, "tick.lua")
	for i := 1; i <= 100; i++ {
		body := strings.Replace(tickRule, `content = run.slot`, fmt.Sprintf(`content = run.slot, version = %d`, i), 1)
		require.NoError(t, os.WriteFile(rule, []byte(body), 0o644))
	}
	eventually(t, 30*time.Second, "messages of the last version", func() bool { return c.outboxHas(`"version":100`) })
	before := c.slotsDelivered()
	eventually(t, 30*time.Second, "two more slots", func() bool { return c.slotsDelivered() >= before+2 })
	settled := time.Now().Add(-3 * time.Second)
	c.stopAll()

	got, _ := c.delivered()
	var slots []time.Time
	for s, k := range got["alice"] {
		require.Equal(t, 1, k, "slot %s sent %d times", s, k)
		if at := mustTime(t, s); at.Before(settled) {
			slots = append(slots, at)
		}
	}
	slices.SortFunc(slots, time.Time.Compare)
	require.NotEmpty(t, slots)
	require.Equal(t, int(slots[len(slots)-1].Sub(slots[0])/time.Second)+1, len(slots), "a slot was missed during the storm")
}
