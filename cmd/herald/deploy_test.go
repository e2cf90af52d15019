package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/heraldhq/herald/rules"
)

// deploySecrets stand for what an operator puts in .env or the
// herald-secrets Secret.
var deploySecrets = map[string]string{
	"HERALD_CLUSTER_SECRET":  "deploy-cluster-secret-0123456789ab",
	"HERALD_TOKEN_DASHBOARD": "deploy-dashboard-token-01234567",
	"HERALD_TOKEN_OPS":       "deploy-ops-token-0123456789abcd",
	"HERALD_TOKEN_ADMIN":     "deploy-admin-token-0123456789ab",
}

// loadDeployConfig loads text as the agent does (--config, then the
// HERALD_* variables), with env set, and returns the result.
func loadDeployConfig(t *testing.T, text string, env map[string]string) nodeConfig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "herald.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	for k, v := range deploySecrets {
		t.Setenv(k, v)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	var c nodeConfig
	cmd := &cobra.Command{}
	c.bindFlags(cmd)
	require.NoError(t, cmd.Flags().Parse([]string{"--config", path}))
	require.NoError(t, c.load(cmd))
	return c
}

// checkDeployRules loads a rules directory as a node with cfg would.
func checkDeployRules(t *testing.T, dir string, cfg nodeConfig) {
	t.Helper()
	limit, err := parseRuleMemoryLimit(cfg.RuleMemoryLimit)
	require.NoError(t, err)
	require.Empty(t, rules.CheckNode(dir, cfg.channelNames(), limit, 0))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
}

// The configs shipped in deploy/ (Compose's shared file with each
// service's variables, the Kubernetes ConfigMap with a pod's) load as a
// node loads them: every key is the agent's, every value valid, and their
// rules are good for their channels. The deploy/check module tests the
// files' structure; this, that the agent accepts what they say.
func TestDeployComposeConfigLoads(t *testing.T) {
	raw, err := os.ReadFile("deploy/compose.yaml")
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &compose))
	require.Len(t, compose.Services, 3)
	text, err := os.ReadFile("deploy/compose/herald.yaml")
	require.NoError(t, err)
	interpolated := regexp.MustCompile(`^\$\{([A-Z_]+):\?.*\}$`)
	for name, s := range compose.Services {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range s.Environment {
				if m := interpolated.FindStringSubmatch(v); m != nil {
					v = deploySecrets[m[1]]
				}
				env[k] = v
			}
			c := loadDeployConfig(t, string(text), env)
			require.Equal(t, name, c.NodeID)
			require.Len(t, c.apiTokens, 3)
			require.Equal(t, deploySecrets["HERALD_CLUSTER_SECRET"], c.clusterSecret)
			require.NotEmpty(t, c.TLSCert)
			checkDeployRules(t, "deploy/compose/rules", c)
		})
	}
}

func TestDeployKubernetesConfigLoads(t *testing.T) {
	raw, err := os.ReadFile("deploy/kubernetes/configmap.yaml")
	require.NoError(t, err)
	maps := map[string]map[string]string{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var doc struct {
			Metadata struct{ Name string } `yaml:"metadata"`
			Data     map[string]string     `yaml:"data"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		maps[doc.Metadata.Name] = doc.Data
	}
	// What statefulset.yaml sets for herald-1, with $(VAR) expanded as
	// the kubelet does, and the --join its start script adds.
	c := loadDeployConfig(t, maps["herald-config"]["herald.yaml"], map[string]string{
		"HERALD_NODE_ID":   "herald-1",
		"HERALD_RAFT_ADDR": "herald-1.herald.ns.svc.cluster.local:7101",
		"HERALD_PEERS":     "herald-1.herald.ns.svc.cluster.local:8101,herald-2.herald.ns.svc.cluster.local:8101",
		"HERALD_TLS_CERT":  "/etc/herald/tls/herald-1.pem",
		"HERALD_TLS_KEY":   "/etc/herald/tls/herald-1-key.pem",
		"HERALD_JOIN":      "https://herald-0.herald.ns.svc.cluster.local:8101",
	})
	require.Equal(t, "herald-1.herald.ns.svc.cluster.local:8101", advertisedHTTPAddr(c.HTTPAddr, c.RaftAddr),
		"the others reach the API at the pod's stable name")
	require.Len(t, c.apiTokens, 3)
	dir := t.TempDir()
	for name, text := range maps["herald-rules"] {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	checkDeployRules(t, dir, c)
}
