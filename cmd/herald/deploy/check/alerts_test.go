package check

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// repoRoot is the repository's root, from cmd/herald/deploy/check.
const repoRoot = "../../../.."

var heraldMetric = regexp.MustCompile(`herald_[a-z0-9_]+`)

// Every metric the alerting rules and the Grafana dashboard query is one
// the agent exports (a quoted name in its Go source, outside tests) and
// the README's metrics table documents; promtool checks the syntax, this
// that no rule waits on a series that never comes.
func TestAlertsAndDashboardUseExportedMetrics(t *testing.T) {
	t.Parallel()
	exported := map[string]bool{}
	require.NoError(t, filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != repoRoot {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir // nested modules and .git: not the agent
			}
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range regexp.MustCompile(`"(herald_[a-z0-9_]+)"`).FindAllStringSubmatch(string(src), -1) {
			exported[m[1]] = true
		}
		return nil
	}))
	require.True(t, exported["herald_raft_state"])
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, n := range heraldMetric.FindAllString(string(readme), -1) {
		documented[n] = true
	}
	for _, f := range []string{"prometheus/alerts.yml", "prometheus/alerts_test.yml", "grafana/herald.json"} {
		raw, err := os.ReadFile(filepath.Join(deployDir, f))
		require.NoError(t, err)
		names := heraldMetric.FindAllString(string(raw), -1)
		require.NotEmpty(t, names, f)
		for _, n := range names {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(n, suffix); ok && exported[base] {
					n = base
				}
			}
			require.True(t, exported[n], "%s: %s is not a metric the agent exports", f, n)
			require.True(t, documented[n], "%s: %s is not in the README's metrics table", f, n)
		}
	}
}
