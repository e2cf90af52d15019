package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/plugins/host"
)

func init() { register(newPluginsCmd) }

// defaultPluginsDir is where `herald plugins list` looks without --dir.
func defaultPluginsDir() string {
	if d := os.Getenv("HERALD_PLUGINS_DIR"); d != "" {
		return d
	}
	return "plugins"
}

func newPluginsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "Inspect channel plugins",
	}
	var dir string
	list := &cobra.Command{
		Use:   "list",
		Short: "List built-in and external channel plugins with their versions",
		Long: "List the built-in channels and the executables named herald-channel-NAME in the\n" +
			"plugins directory. Each is launched briefly to ask its version and limits.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			plugins, err := host.List(ctx, host.Config{PluginsDir: dir})
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tKIND\tVERSION\tPATH\tLIMITS")
			for _, p := range plugins {
				kind := "external"
				switch {
				case p.Builtin:
					kind = "built-in"
				case p.Overrides:
					kind = "external (overrides built-in)"
				}
				path := p.Path
				if path == "" {
					path = "-"
				}
				version, limits := p.Version, describeLimits(p)
				if p.Error != "" {
					version, limits = "?", "error: "+p.Error
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.Name, kind, version, path, limits)
			}
			return w.Flush()
		},
	}
	list.Flags().StringVar(&dir, "dir", defaultPluginsDir(), "plugins directory (env HERALD_PLUGINS_DIR)")
	cmd.AddCommand(list)
	return cmd
}

func describeLimits(p host.PluginInfo) string {
	if len(p.Limits) == 0 {
		return "-"
	}
	parts := make([]string, len(p.Limits))
	for i, l := range p.Limits {
		parts[i] = fmt.Sprintf("%d/%s per %s", l.Count, l.Per, l.Scope)
	}
	return strings.Join(parts, ", ")
}
