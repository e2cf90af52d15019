package check

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/stretchr/testify/require"
)

// The Dockerfile parsed as `docker build` parses it (BuildKit's parser and
// instruction decoder), then its key instructions checked: CI has no
// registry to build it from.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join(deployDir, "Dockerfile"))
	require.NoError(t, err)
	defer f.Close()
	res, err := parser.Parse(f)
	require.NoError(t, err)
	require.Empty(t, res.Warnings)
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	require.NoError(t, err)
	require.Len(t, stages, 2, "multi-stage: build, then run")
	build, run := stages[0], stages[1]
	require.NotEmpty(t, build.Name)
	require.True(t, slices.ContainsFunc(metaArgs, func(a instructions.ArgCommand) bool {
		return slices.ContainsFunc(a.Args, func(kv instructions.KeyValuePairOptional) bool { return kv.Key == "GO_VERSION" })
	}))
	goMod, err := os.ReadFile("../../../../go.mod")
	require.NoError(t, err)
	require.Contains(t, string(goMod), "\ngo "+argDefault(metaArgs, "GO_VERSION")+"\n", "the build stage's Go is go.mod's")

	// A static binary of ./cmd/herald.
	var built bool
	for _, c := range build.Commands {
		if r, ok := c.(*instructions.RunCommand); ok {
			line := strings.Join(r.CmdLine, " ")
			if strings.Contains(line, "go build") {
				require.Contains(t, line, "CGO_ENABLED=0")
				require.Contains(t, line, "./cmd/herald")
				built = true
			}
		}
	}
	require.True(t, built)

	// The run stage: the binary from the build stage, a non-root user,
	// the data dir a volume, the health check on /v1/health.
	require.True(t, strings.HasPrefix(run.BaseName, "alpine:"), "busybox sh and wget: the Kubernetes start script and the health check use them")
	var (
		copied, volume, health bool
		user                   string
		exposed                []string
		entry                  []string
	)
	for _, c := range run.Commands {
		switch c := c.(type) {
		case *instructions.CopyCommand:
			require.Equal(t, build.Name, c.From)
			require.Equal(t, []string{"/usr/local/bin/herald"}, []string{c.DestPath})
			copied = true
		case *instructions.UserCommand:
			user = c.User
		case *instructions.VolumeCommand:
			volume = slices.Contains(c.Volumes, "/var/lib/herald")
		case *instructions.ExposeCommand:
			exposed = c.Ports
		case *instructions.HealthCheckCommand:
			line := strings.Join(c.Health.Test, " ")
			require.Contains(t, line, "/v1/health")
			require.Contains(t, line, "127.0.0.1:8101")
			health = true
		case *instructions.EntrypointCommand:
			entry = c.CmdLine
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				if kv.Key == "HERALD_DATA_DIR" {
					require.Equal(t, "/var/lib/herald", kv.Value)
				}
			}
		}
	}
	require.True(t, copied)
	require.True(t, volume, "VOLUME /var/lib/herald")
	require.True(t, health, "HEALTHCHECK")
	require.Equal(t, "10001:10001", user, "the uid the Kubernetes manifests run as")
	require.ElementsMatch(t, []string{"7101", "8101"}, exposed)
	require.Equal(t, []string{"/usr/local/bin/herald"}, entry)
}

func argDefault(args []instructions.ArgCommand, name string) string {
	for _, a := range args {
		for _, kv := range a.Args {
			if kv.Key == name && kv.Value != nil {
				return *kv.Value
			}
		}
	}
	return ""
}
