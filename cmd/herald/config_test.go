package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/leader"
	"github.com/heraldhq/herald/rules"
)

func TestRaftTimeouts(t *testing.T) {
	for in, want := range map[string]raftTimeouts{
		"":                                     raftTimeoutsLAN,
		"lan":                                  raftTimeoutsLAN,
		"wan":                                  raftTimeoutsWAN,
		"heartbeat=1s,election=2s,lease=300ms": {Heartbeat: time.Second, Election: 2 * time.Second, Lease: 300 * time.Millisecond},
		" election = 3s ":                      {Heartbeat: 500 * time.Millisecond, Election: 3 * time.Second, Lease: 500 * time.Millisecond},
	} {
		got, err := parseRaftTimeouts(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for in, reason := range map[string]string{
		"fast":                      "want lan, wan",
		"heartbeat=0s":              "positive",
		"beat=1s":                   "unknown timeout",
		"heartbeat=1s,lease=2s":     "lease 2s exceeds heartbeat 1s",
		"heartbeat=2s,election=1s":  "election 1s is below heartbeat 2s",
		"heartbeat=1s,,election=1s": "is not one",
	} {
		_, err := parseRaftTimeouts(in)
		require.ErrorContains(t, err, reason, in)
	}
	c := nodeConfig{NodeID: "n1", DataDir: "d", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2", RaftTimeouts: "wan?"}
	require.ErrorContains(t, c.validate(), `raft_timeouts "wan?"`)
}

func TestPlanAheadConfig(t *testing.T) {
	for in, want := range map[string]time.Duration{"": time.Minute, "0s": 0, "90s": 90 * time.Second, "10m": 10 * time.Minute} {
		got, err := parsePlanAhead(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"11m", "-1s", "soon"} {
		_, err := parsePlanAhead(in)
		require.ErrorContains(t, err, "want a duration from 0s to 10m0s", in)
	}
}

func TestAuditRetentionConfig(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 90 * 24 * time.Hour, "24h": 24 * time.Hour, "8760h": 365 * 24 * time.Hour} {
		got, err := parseAuditRetention(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"1h", "90d", "-24h", "0"} {
		_, err := parseAuditRetention(in)
		require.ErrorContains(t, err, "at least 24h", in)
	}
	c := nodeConfig{NodeID: "n1", DataDir: "d", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2", AuditRetention: "1h"}
	require.ErrorContains(t, c.validate(), `audit_retention "1h"`)
}

// max_clock_skew is a duration from 1s to 1h (default 10s), read from the
// YAML key, the env HERALD_MAX_CLOCK_SKEW and the flag --max-clock-skew,
// the flag winning; a bad one stops the node naming the key.
func TestMaxClockSkewConfig(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 10 * time.Second, "1s": time.Second, "30s": 30 * time.Second, "1h": time.Hour} {
		got, err := parseMaxClockSkew(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"500ms", "2h", "-10s", "0", "ten seconds"} {
		_, err := parseMaxClockSkew(in)
		require.ErrorContains(t, err, "want a duration from 1s to 1h", in)
	}
	c := nodeConfig{NodeID: "n1", DataDir: "d", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2", MaxClockSkew: "5m0"}
	require.ErrorContains(t, c.validate(), `max_clock_skew "5m0"`)

	t.Setenv("HERALD_MAX_CLOCK_SKEW", "30s")
	load := func(args ...string) (nodeConfig, error) {
		var c nodeConfig
		cmd := &cobra.Command{}
		c.bindFlags(cmd)
		require.NoError(t, cmd.Flags().Parse(append([]string{"--node-id", "n1", "--data-dir", "d", "--raft-addr", "127.0.0.1:1", "--http-addr", "127.0.0.1:2"}, args...)))
		return c, c.load(cmd)
	}
	c, err := load()
	require.NoError(t, err)
	require.Equal(t, "30s", c.MaxClockSkew)
	c, err = load("--max-clock-skew", "20s")
	require.NoError(t, err)
	require.Equal(t, "20s", c.MaxClockSkew)
	_, err = load("--max-clock-skew", "2h")
	require.ErrorContains(t, err, `config: max_clock_skew "2h": want a duration from 1s to 1h, such as 10s`)
}

// TestRetentionConfig: retention and ledger_retention default to 7 and 90
// days, and a ledger not longer than retention is refused, naming both.
func TestRetentionConfig(t *testing.T) {
	base := nodeConfig{NodeID: "n1", DataDir: "d", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"}
	r, l, err := base.retentions()
	require.NoError(t, err)
	require.Equal(t, [2]time.Duration{7 * 24 * time.Hour, 90 * 24 * time.Hour}, [2]time.Duration{r, l})
	c := base
	c.Retention, c.LedgerRetention = "720h", "2161h"
	r, l, err = c.retentions()
	require.NoError(t, err)
	require.Equal(t, [2]time.Duration{720 * time.Hour, 2161 * time.Hour}, [2]time.Duration{r, l})
	for _, tc := range []struct{ retention, ledger, err string }{
		{"2160h", "", "config: ledger_retention 2160h0m0s must be longer than retention 2160h0m0s"},
		{"", "168h", "config: ledger_retention 168h0m0s must be longer than retention 168h0m0s"},
		{"48h", "24h", "config: ledger_retention 24h0m0s must be longer than retention 48h0m0s"},
		{"30m", "", `config: retention "30m": want a duration of at least 1h`},
		{"7d", "", `config: retention "7d": want a duration of at least 1h`},
		{"", "-1h", `config: ledger_retention "-1h": want a duration`},
	} {
		c := base
		c.Retention, c.LedgerRetention = tc.retention, tc.ledger
		require.ErrorContains(t, c.validate(), tc.err, tc)
	}
}

// TestRetentionConfigKeys: both keys are read from the file, HERALD_* and
// flags like every other key.
func TestRetentionConfigKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.yaml")
	require.NoError(t, os.WriteFile(path, []byte("node_id: n1\ndata_dir: d\nraft_addr: 127.0.0.1:1\nhttp_addr: 127.0.0.1:2\nretention: 24h\nledger_retention: 48h\n"), 0o600))
	t.Setenv("HERALD_LEDGER_RETENTION", "72h")
	var cfg nodeConfig
	cmd := newAgentCmd()
	require.NoError(t, cmd.Flags().Set("config", path))
	require.NoError(t, cmd.Flags().Set("retention", "36h"))
	require.NoError(t, cfg.load(cmd))
	r, l, err := cfg.retentions()
	require.NoError(t, err)
	require.Equal(t, [2]time.Duration{36 * time.Hour, 72 * time.Hour}, [2]time.Duration{r, l})
}

// TestLedgerShorterThanACatchupRefusesToStart: a node whose
// ledger_retention is not longer than a rule's catchup does not start, and
// says which rule.
func TestLedgerShorterThanACatchupRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	rulesDir := filepath.Join(dir, "rules")
	require.NoError(t, os.MkdirAll(rulesDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(rulesDir, "late.lua"), []byte(`return rule {
  name = "late", channel = "mock", schedule = "0 9 * * *",
  catchup = "72h",
  recipients = function(run) return { "alice" } end,
  message = function(run, to) return { content = "hi" } end,
}
`), 0o600))
	cfg := nodeConfig{NodeID: "n1", DataDir: filepath.Join(dir, "n1"), RaftAddr: freeAddr(t), HTTPAddr: freeAddr(t), Bootstrap: true,
		Rules: rulesDir, Retention: "24h", LedgerRetention: "48h", devTimeouts: true, raftLogLevel: "error"}
	require.NoError(t, cfg.validate())
	_, err := startNode(context.Background(), cfg, newLogger("error", ""))
	require.ErrorContains(t, err, "config: ledger_retention 48h0m0s is not longer than every rule's catchup: late.lua:3: catchup 72h0m0s is not shorter than ledger_retention 48h0m0s")
	_, statErr := os.Stat(filepath.Join(cfg.DataDir, "raft.db"))
	require.True(t, os.IsNotExist(statErr), "refused before Raft opened the data dir")
}

// readmeSecureConfig is the three-node config of the README's "Securing
// Herald": node n1's YAML block, verbatim.
func readmeSecureConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n## Securing Herald\n")
	require.True(t, ok, "the README has a Securing Herald section")
	section, _, _ = strings.Cut(section, "\n## ")
	m := regexp.MustCompile("(?s)```yaml\n(node_id: n1\n.*?)```").FindStringSubmatch(section)
	require.NotNil(t, m, "Securing Herald holds node n1's config as a yaml block")
	return m[1]
}

// The README's secure config is loaded by the agent's own loader, as n1
// and as n2 (which differs as the README says), so the documented keys
// cannot drift from the real ones: an unknown or misspelt key, a token
// that is not an ${ENV} reference, a bad plugin sum fail here.
func TestReadmeSecureConfigLoads(t *testing.T) {
	n1 := readmeSecureConfig(t)
	for name, v := range map[string]string{
		"HERALD_CLUSTER_SECRET":  "readme-cluster-secret-0123456789ab",
		"HERALD_TOKEN_DASHBOARD": "readme-dashboard-token-01234567",
		"HERALD_TOKEN_OPS":       "readme-ops-token-0123456789abcd",
		"HERALD_TOKEN_ADMIN":     "readme-admin-token-0123456789ab",
		"WECOM_SECRET":           "readme-wecom-secret",
	} {
		t.Setenv(name, v)
	}
	n2 := strings.NewReplacer("node_id: n1", "node_id: n2", "10.0.0.1:7101", "10.0.0.2:7101", "http_addr: 10.0.0.1:8101", "http_addr: 10.0.0.2:8101",
		"bootstrap: true", "join: https://10.0.0.1:8101", "/n1", "/n2", `"10.0.0.2:8101,10.0.0.3:8101"`, `"10.0.0.1:8101,10.0.0.3:8101"`).Replace(n1)
	require.NotEqual(t, n1, n2)
	for node, text := range map[string]string{"n1": n1, "n2": n2} {
		path := filepath.Join(t.TempDir(), node+".yaml")
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
		var cfg nodeConfig
		cmd := newAgentCmd()
		require.NoError(t, cmd.Flags().Set("config", path))
		require.NoError(t, cfg.load(cmd), node)

		require.Equal(t, node, cfg.NodeID)
		require.Equal(t, node == "n1", cfg.Bootstrap)
		require.Equal(t, node == "n2", cfg.Join == "https://10.0.0.1:8101")
		require.Len(t, cfg.peerList(), 2)
		require.Equal(t, "/etc/herald/tls/"+node+".pem", cfg.TLSCert)
		require.Equal(t, "readme-cluster-secret-0123456789ab", cfg.clusterSecret)
		roles := map[string]api.Role{}
		for _, tok := range cfg.apiTokens {
			roles[tok.Name] = tok.Role
		}
		require.Equal(t, map[string]api.Role{"dashboard": api.RoleRead, "ops": api.RoleOperate, "admin": api.RoleAdmin}, roles)
		require.Len(t, cfg.PluginSHA256, 1)
		require.Contains(t, cfg.Channels, "wecom_sales")
		d, err := parseAuditRetention(cfg.AuditRetention)
		require.NoError(t, err)
		require.Equal(t, 90*24*time.Hour, d)
	}
}

func TestRuleMemoryLimitConfig(t *testing.T) {
	for in, want := range map[string]uint64{"": 0, "16MiB": 16 << 20, "512 MiB": 512 << 20, "2GiB": 2 << 30, "65536KiB": 64 << 20} {
		got, err := parseRuleMemoryLimit(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"8MiB", "128", "128MB", "1.5GiB", "-1GiB", "MiB", "99999999999GiB"} {
		_, err := parseRuleMemoryLimit(in)
		require.ErrorContains(t, err, "want a size of at least 16MiB", in)
	}
	c := nodeConfig{NodeID: "n1", DataDir: "d", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2", RuleMemoryLimit: "8MiB"}
	require.ErrorContains(t, c.validate(), `rule_memory_limit "8MiB"`)
}

// rule_timeout and plan_timeout: defaults, ranges, and a plan's limit no
// shorter than one call's.
func TestRuleAndPlanTimeoutConfig(t *testing.T) {
	base := nodeConfig{NodeID: "n1", DataDir: "d", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"}
	rule, plan, err := base.timeouts()
	require.NoError(t, err)
	require.Equal(t, rules.DefaultCallTimeout, rule)
	require.Equal(t, leader.PlanTimeoutDefault, plan)
	c := base
	c.RuleTimeout, c.PlanTimeout = "30s", "10m"
	rule, plan, err = c.timeouts()
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, rule)
	require.Equal(t, 10*time.Minute, plan)
	for _, bad := range []struct{ rule, plan, want string }{
		{"50ms", "", `rule_timeout "50ms": want a duration from 100ms to 1m0s`},
		{"2m", "", `rule_timeout "2m": want a duration from 100ms to 1m0s`},
		{"soon", "", `rule_timeout "soon"`},
		{"", "500ms", `plan_timeout "500ms": want a duration from 1s to 1h0m0s`},
		{"", "2h", `plan_timeout "2h"`},
		{"30s", "10s", "plan_timeout 10s is shorter than rule_timeout 30s"},
	} {
		c := base
		c.RuleTimeout, c.PlanTimeout = bad.rule, bad.plan
		require.ErrorContains(t, c.validate(), bad.want, bad)
	}
}

// pprof has no auth: an address other machines can reach stops the node
// at start, unless pprof_allow_remote says so (then the node warns).
func TestPprofAddrLoopbackOnly(t *testing.T) {
	base := nodeConfig{NodeID: "n1", DataDir: "d", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"}
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "10.0.0.1:6060", "[::]:6060", "evil.example:6060"} {
		c := base
		c.PprofAddr = addr
		require.ErrorContains(t, c.validate(), "pprof_addr \""+addr+"\" is not a loopback address", addr)
		c.PprofAllowRemote = true
		require.NoError(t, c.validate(), addr)
	}
	for _, addr := range []string{"127.0.0.1:6060", "[::1]:6060", "localhost:6060", ""} {
		c := base
		c.PprofAddr = addr
		require.NoError(t, c.validate(), addr)
	}

	var logs strings.Builder
	c := base
	c.PprofAddr, c.PprofAllowRemote = "0.0.0.0:6060", true
	warnExposure(c, slog.New(slog.NewTextHandler(&logs, nil)))
	require.Contains(t, logs.String(), "pprof serves profiles without auth")
	logs.Reset()
	c.PprofAddr = "127.0.0.1:6060"
	warnExposure(c, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NotContains(t, logs.String(), "pprof")
}
