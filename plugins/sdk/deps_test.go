package sdk_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sdkModules are the only non-standard modules a plugin built on the SDK
// compiles in: go-plugin, gRPC, protobuf and what they need. A plugin
// author's go.mod lists these and nothing of Herald's own stack (Raft, Lua,
// bbolt, Prometheus), which is why plugins/sdk need not be a module of its
// own (plugins/DESIGN.md, "Why the SDK is not a module of its own").
var sdkModules = []string{
	"github.com/hashicorp/go-plugin", "github.com/hashicorp/go-hclog", "github.com/hashicorp/yamux",
	"github.com/fatih/color", "github.com/mattn/go-colorable", "github.com/mattn/go-isatty", "github.com/oklog/run",
	"github.com/golang/protobuf", "google.golang.org/grpc", "google.golang.org/protobuf", "google.golang.org/genproto",
	"golang.org/x/net", "golang.org/x/sys", "golang.org/x/text",
}

// The SDK imports nothing of Herald but the delivery values (heraldtype, a
// leaf of the standard library) and the protocol's generated code, and
// no module beyond sdkModules.
func TestSDKDependsOnlyOnTheProtocol(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	require.NoError(t, err, string(out))
	var herald []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/heraldhq/herald/") {
			herald = append(herald, p)
			continue
		}
		allowed := false
		for _, m := range sdkModules {
			allowed = allowed || p == m || strings.HasPrefix(p, m+"/")
		}
		require.True(t, allowed, "plugins/sdk now compiles in %s: every plugin would carry it (add it to sdkModules only if a plugin must)", p)
	}
	require.ElementsMatch(t, []string{"github.com/heraldhq/herald/engine/heraldtype", "github.com/heraldhq/herald/plugins/proto/channel/v1", "github.com/heraldhq/herald/plugins/sdk"}, herald)
}
