package check

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// deployDir is cmd/herald/deploy, where the files under test live.
const deployDir = ".."

// configKeyLine is one row of the agent's key list in cmd/herald/config.go:
// {"node_id", "node-id", ...}.
var configKeyLine = regexp.MustCompile(`\{"([a-z0-9_]+)", "([a-z0-9-]+)", "`)

// agentEnv is every HERALD_* variable the agent reads as a config key
// (HERALD_NODE_ID for node_id ...), read from the agent's source, so a
// renamed key fails these tests rather than a deployment.
func agentEnv(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile("../../config.go")
	require.NoError(t, err)
	env := map[string]bool{}
	for _, m := range configKeyLine.FindAllStringSubmatch(string(src), -1) {
		require.Equal(t, m[1], strings.ReplaceAll(m[2], "-", "_"), "key %s and its flag --%s", m[1], m[2])
		env["HERALD_"+strings.ToUpper(m[1])] = true
	}
	require.Greater(t, len(env), 10, "the key list in cmd/herald/config.go moved: update configKeyLine")
	for _, k := range []string{"HERALD_NODE_ID", "HERALD_RAFT_ADDR", "HERALD_HTTP_ADDR", "HERALD_TLS_CERT", "HERALD_CLUSTER_SECRET", "HERALD_PEERS"} {
		require.True(t, env[k], k)
	}
	return env
}

// envRef is a ${NAME} reference in a config file (tokens, secrets).
var envRef = regexp.MustCompile(`\$\{([A-Z0-9_]+)\}`)

// checkEnv requires every HERALD_* variable set to be a config key or a
// variable the config references, and every reference outside a comment
// to be set.
func checkEnv(t *testing.T, where string, env map[string]string, config string, keys map[string]bool) {
	t.Helper()
	var live []string
	for _, line := range strings.Split(config, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			live = append(live, line)
		}
	}
	refs := map[string]bool{}
	for _, m := range envRef.FindAllStringSubmatch(strings.Join(live, "\n"), -1) {
		refs[m[1]] = true
		_, ok := env[m[1]]
		require.True(t, ok, "%s: the config references ${%s}, which is not set", where, m[1])
	}
	for name := range env {
		if strings.HasPrefix(name, "HERALD_") {
			require.True(t, keys[name] || refs[name], "%s: %s is neither a config key's variable nor referenced by the config", where, name)
		}
	}
}

// The agent's listening ports as the deployment files use them.
const (
	raftPort = 7101
	httpPort = 8101
)
