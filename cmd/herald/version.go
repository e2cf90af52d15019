package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/engine"
)

func init() { register(newVersionCmd) }

// version is the release version, stamped at build time:
//
//	go build -ldflags "-X main.version=v1.4.0" ./cmd/herald
//
// Empty, the main module's version from the build info stands in (set by
// `go install ...@v1.4.0`), else "devel".
var version string

// versionInfo is what `herald version --json` prints: which build this is.
type versionInfo struct {
	Version string `json:"version"`
	// Revision is the VCS commit Go stamped into the binary; Modified says
	// the work tree had changes not committed. For `go run`, which stamps
	// none, the checkout's commit (FromCheckout).
	Revision     string `json:"revision,omitempty"`
	Modified     bool   `json:"modified,omitempty"`
	FromCheckout bool   `json:"from_checkout,omitempty"`
	// Time is the commit's time (RFC 3339, UTC), as Go stamped it.
	Time      string `json:"time,omitempty"`
	GoVersion string `json:"go_version"`
	// FSMVersion is the replicated log's version this build applies
	// (engine.FSMVersion); Build the name member records carry
	// (engine.Build).
	FSMVersion uint16 `json:"fsm_version"`
	Build      string `json:"build"`
	// String is the one line of text the agent logs first, /v1/status
	// shows as version and `herald --version` prints.
	String string `json:"string"`
}

// readVersion reads this binary's version from its build info.
func readVersion() versionInfo {
	v := versionInfo{Version: version, GoVersion: runtime.Version(), FSMVersion: engine.FSMVersion, Build: engine.Build}
	info, ok := debug.ReadBuildInfo()
	if ok {
		if v.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			case "vcs.time":
				v.Time = s.Value
			}
		}
		if v.Revision == "" {
			if wd, err := os.Getwd(); err == nil {
				v.Revision = checkoutRevision(wd, info.Main.Path)
				v.FromCheckout = v.Revision != ""
			}
		}
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	v.String = v.text()
	return v
}

// shortRevision is the revision as people and the metric's label read it:
// 12 characters, "-dirty" for a modified tree.
func (v versionInfo) shortRevision() string {
	if v.Revision == "" {
		return "unknown"
	}
	r := short(v.Revision)
	if v.Modified {
		r += "-dirty"
	}
	return r
}

// text is the one-line version: "v1.4.0 (revision 1efbf8d0c9d3, committed
// 2026-11-30T08:12:44Z, go1.26.8, FSM version 4)".
func (v versionInfo) text() string {
	parts := []string{"revision " + v.shortRevision()}
	if v.FromCheckout {
		parts[0] = "checkout revision " + v.shortRevision() // go run: what is checked out, perhaps with changes
	}
	if v.Time != "" {
		parts = append(parts, "committed "+v.Time)
	}
	parts = append(parts, v.GoVersion, "FSM version "+strconv.Itoa(int(v.FSMVersion)))
	return v.Version + " (" + strings.Join(parts, ", ") + ")"
}

// buildInfoCollector is herald_build_info: 1, with the build in labels,
// so that a dashboard or an alert can tell which members run what.
func buildInfoCollector(v versionInfo) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "herald_build_info",
		Help: "Always 1; the labels name this node's build: version, VCS revision, Go version and the FSM version it applies.",
		ConstLabels: prometheus.Labels{"version": v.Version, "revision": v.shortRevision(), "go_version": v.GoVersion,
			"fsm_version": strconv.Itoa(int(v.FSMVersion))},
	})
	g.Set(1)
	return g
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print this binary's version, VCS revision, Go version and FSM version",
		Long: `Print which build this binary is: its version (-ldflags "-X main.version=…",
else the module version, else devel), the VCS revision and commit time Go
stamped into it, the Go version, and the FSM version (the replicated log's
version it applies; members of one cluster may differ by one during a
rolling upgrade). The running agent logs the same line first and shows it
in /v1/status (version) and the herald_build_info metric.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readVersion()
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "herald "+v.String)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print it as JSON")
	return cmd
}
