package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

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
	var dir, configPath string
	list := &cobra.Command{
		Use:   "list",
		Short: "List built-in and external channel plugins with their versions and sha256",
		Long: "List the built-in channels and the executables named herald-channel-NAME in the\n" +
			"plugins directory. An external plugin runs only when its sha256 is listed in the\n" +
			"config's plugin_sha256 (give the node's config with --config): a listed one is\n" +
			"launched briefly to ask its version and limits; an unlisted one is never run,\n" +
			"and the line that would allow it is printed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			allowed, err := readPluginSHA256(configPath)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			plugins, err := host.List(ctx, host.Config{PluginsDir: dir, PluginSHA256: allowed})
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tKIND\tVERSION\tSHA256\tPATH\tLIMITS")
			var unlisted []host.PluginInfo
			for _, p := range plugins {
				kind := "external"
				switch {
				case p.Builtin:
					kind = "built-in"
				case p.Overrides:
					kind = "external (overrides built-in)"
				}
				path, sum := p.Path, p.SHA256
				if path == "" {
					path = "-"
				}
				if sum == "" {
					sum = "-"
				}
				version, limits := p.Version, describeLimits(p)
				switch {
				case !p.Allowed && p.SHA256 != "" && allowed[p.Name] == "":
					version, limits = "not run", "not allowed: its sha256 is not listed in plugin_sha256"
					unlisted = append(unlisted, p)
				case !p.Allowed && p.SHA256 != "":
					// listed with another sum: the host says which, and
					// adding a second entry for the name is no answer
					version, limits = "not run", "not allowed: "+p.Error
				case p.Error != "":
					version, limits = "?", "error: "+p.Error
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, kind, version, sum, path, limits)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if len(unlisted) > 0 {
				out := cmd.OutOrStdout()
				fmt.Fprintln(out, "\nNot run: these files are not allowed. If you trust them, add to every node's config:")
				fmt.Fprintln(out, "plugin_sha256:")
				for _, p := range unlisted {
					fmt.Fprintf(out, "  %s: %s\n", p.Name, p.SHA256)
				}
			}
			return nil
		},
	}
	list.Flags().StringVar(&dir, "dir", defaultPluginsDir(), "plugins directory (env HERALD_PLUGINS_DIR)")
	list.Flags().StringVar(&configPath, "config", os.Getenv("HERALD_CONFIG"), "node config whose plugin_sha256 allows plugins (env HERALD_CONFIG)")
	cmd.AddCommand(list)
	return cmd
}

// readPluginSHA256 reads only plugin_sha256 from a node config file ("":
// none listed).
func readPluginSHA256(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var c struct {
		PluginSHA256 map[string]string `yaml:"plugin_sha256"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return checkPluginSHA256(c.PluginSHA256)
}

// checkPluginSHA256 validates plugin_sha256 and lowers its hex.
func checkPluginSHA256(in map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(in))
	for name, sum := range in {
		s, err := host.CheckSHA256(name, sum)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		out[name] = s
	}
	return out, nil
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
