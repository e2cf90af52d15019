package api

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var metricName = regexp.MustCompile(`herald_[a-z_]+`)

// The Grafana dashboard shipped in the repository queries only metrics the
// README documents, and the README documents every metric this package
// exports.
func TestGrafanaDashboardUsesDocumentedMetrics(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, n := range metricName.FindAllString(string(readme), -1) {
		documented[n] = true
	}
	raw, err := os.ReadFile("../../cmd/herald/deploy/grafana/herald.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.NotEmpty(t, dash.Panels)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			names := metricName.FindAllString(tg.Expr, -1)
			require.NotEmpty(t, names, p.Title)
			for _, n := range names {
				n = strings.TrimSuffix(n, "_bucket")
				require.True(t, documented[n], "%s: %s is not in the README's metrics table", p.Title, n)
			}
		}
	}
	f := setup(t)
	w := get(f.api, "GET", "/metrics")
	for _, n := range regexp.MustCompile(`(?m)^# TYPE (herald_[a-z_]+)`).FindAllStringSubmatch(w.Body.String(), -1) {
		require.True(t, documented[n[1]], "%s is exported but not in the README", n[1])
	}
}
