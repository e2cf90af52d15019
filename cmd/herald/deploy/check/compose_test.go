package check

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// composeFile is the part of the Compose specification compose.yaml uses;
// decoded with unknown fields refused, so a misspelt key fails here. (The
// Compose project's own loader needs a newer Go than Herald's.)
type composeFile struct {
	XHerald  any                       `yaml:"x-herald"`
	XEnv     any                       `yaml:"x-env"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Restart         string            `yaml:"restart"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	Hostname        string            `yaml:"hostname"`
	Environment     map[string]string `yaml:"environment"`
	Ports           []string          `yaml:"ports"`
	Volumes         []string          `yaml:"volumes"`
	Healthcheck     struct {
		Test        []string `yaml:"test"`
		Interval    string   `yaml:"interval"`
		Timeout     string   `yaml:"timeout"`
		StartPeriod string   `yaml:"start_period"`
		Retries     int      `yaml:"retries"`
	} `yaml:"healthcheck"`
}

// Compose's own ${VAR:?message} interpolation of .env.
var composeRef = regexp.MustCompile(`^\$\{(HERALD_[A-Z_]+):\?[^}]+\}$`)

func TestCompose(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(deployDir, "compose.yaml"))
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var cf composeFile
	require.NoError(t, dec.Decode(&cf))
	require.Len(t, cf.Services, 3)

	cfgText, err := os.ReadFile(filepath.Join(deployDir, "compose", "herald.yaml"))
	require.NoError(t, err)
	keys := agentEnv(t)
	var bootstraps int
	for name, s := range cf.Services {
		require.Equal(t, "../../..", s.Build.Context, "%s: the repository's root", name)
		require.Equal(t, "cmd/herald/deploy/Dockerfile", s.Build.Dockerfile, name)
		env := s.Environment
		checkEnv(t, "compose.yaml "+name, env, string(cfgText), keys)
		require.Equal(t, name, env["HERALD_NODE_ID"], "%s: the node id is the service's name (its certificate's, its DNS name's)", name)
		require.Equal(t, name, s.Hostname)
		require.Equal(t, name+":7101", env["HERALD_RAFT_ADDR"])
		require.Equal(t, "0.0.0.0:8101", env["HERALD_HTTP_ADDR"])
		require.Equal(t, "/etc/herald/tls/"+name+".pem", env["HERALD_TLS_CERT"])
		require.Equal(t, "/etc/herald/tls/"+name+"-key.pem", env["HERALD_TLS_KEY"])
		require.Equal(t, "/etc/herald/tls/ca.pem", env["HERALD_TLS_CA"])
		for _, k := range []string{"HERALD_CLUSTER_SECRET", "HERALD_TOKEN_ADMIN", "HERALD_TOKEN_OPS", "HERALD_TOKEN_DASHBOARD"} {
			m := composeRef.FindStringSubmatch(env[k])
			require.NotNil(t, m, "%s %s: from .env, refused when unset", name, k)
			require.Equal(t, k, m[1])
		}
		if env["HERALD_BOOTSTRAP"] == "true" {
			bootstraps++
			require.Empty(t, env["HERALD_JOIN"])
			require.NotEmpty(t, env["HERALD_PEERS"])
		} else {
			require.Regexp(t, `^https://n1:8101$`, env["HERALD_JOIN"], name)
		}
		require.Contains(t, s.Volumes, "./compose/herald.yaml:/etc/herald/herald.yaml:ro", "%s: at the Dockerfile's --config", name)
		require.Contains(t, s.Volumes, "./compose/rules:/etc/herald/rules:ro")
		require.Contains(t, s.Volumes, "./herald-tls:/etc/herald/tls:ro")
		require.Contains(t, s.Volumes, name+"-data:/var/lib/herald")
		require.Contains(t, cf.Volumes, name+"-data")
		require.Len(t, s.Ports, 1)
		require.True(t, strings.HasPrefix(s.Ports[0], "127.0.0.1:") && strings.HasSuffix(s.Ports[0], ":8101"), s.Ports[0])
		require.Contains(t, strings.Join(s.Healthcheck.Test, " "), "https://127.0.0.1:8101/v1/health")
	}
	require.Equal(t, 1, bootstraps, "one node forms the cluster, the others join it")
}
