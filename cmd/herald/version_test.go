package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// herald version, --json and --version all say the same build, in the
// line the agent logs and /v1/status shows.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	want := readVersion()
	out, err := runHerald(t, "version")
	require.NoError(t, err)
	require.Equal(t, "herald "+want.String+"\n", out)
	require.Contains(t, out, fmt.Sprintf("FSM version %d", engine.FSMVersion))
	require.Contains(t, out, runtime.Version())

	out, err = runHerald(t, "version", "--json")
	require.NoError(t, err)
	var got versionInfo
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, want, got)
	require.Equal(t, engine.FSMVersion, got.FSMVersion)
	require.Equal(t, runtime.Version(), got.GoVersion)
	require.Equal(t, engine.Build, got.Build)
	require.NotEmpty(t, got.Version)

	out, err = runHerald(t, "--version")
	require.NoError(t, err)
	require.Equal(t, "herald version "+want.String+"\n", out)
}

func TestVersionText(t *testing.T) {
	t.Parallel()
	v := versionInfo{Version: "v1.4.0", Revision: "1efbf8d0c9d3b1a2e4f5061728394a5b6c7d8e9f", Time: "2026-11-30T08:12:44Z",
		GoVersion: "go1.26.8", FSMVersion: 4}
	require.Equal(t, "v1.4.0 (revision 1efbf8d0c9d3, committed 2026-11-30T08:12:44Z, go1.26.8, FSM version 4)", v.text())
	v.Modified = true
	require.Equal(t, "v1.4.0 (revision 1efbf8d0c9d3-dirty, committed 2026-11-30T08:12:44Z, go1.26.8, FSM version 4)", v.text())
	v = versionInfo{Version: "devel", Revision: v.Revision, FromCheckout: true, GoVersion: "go1.26.8", FSMVersion: 4}
	require.Equal(t, "devel (checkout revision 1efbf8d0c9d3, go1.26.8, FSM version 4)", v.text(), "go run: no commit time stamped")
	v = versionInfo{Version: "devel", GoVersion: "go1.26.8", FSMVersion: 4}
	require.Equal(t, "devel (revision unknown, go1.26.8, FSM version 4)", v.text())
}

func TestBuildInfoMetric(t *testing.T) {
	t.Parallel()
	v := versionInfo{Version: "v1.4.0", Revision: "1efbf8d0c9d3b1a2e4f5061728394a5b6c7d8e9f", Modified: true, GoVersion: "go1.26.8", FSMVersion: 4}
	const want = `# HELP herald_build_info Always 1; the labels name this node's build: version, VCS revision, Go version and the FSM version it applies.
# TYPE herald_build_info gauge
herald_build_info{fsm_version="4",go_version="go1.26.8",revision="1efbf8d0c9d3-dirty",version="v1.4.0"} 1
`
	require.NoError(t, testutil.CollectAndCompare(buildInfoCollector(v), strings.NewReader(want)))
}
