package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/plugins/builtin"
	"github.com/heraldhq/herald/plugins/sdk"
)

func init() { register(newPluginCmd) }

// newPluginCmd is the hidden `herald plugin serve NAME`: the plugin host
// runs built-in channels through it, so that they cross the same go-plugin
// boundary as external ones.
func newPluginCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "plugin",
		Short:  "Internal: serve a built-in channel plugin",
		Hidden: true,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "serve NAME",
		Short: "Serve the built-in channel NAME over go-plugin (started by the plugin host)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			newChannel, ok := builtin.Lookup(args[0])
			if !ok {
				return fmt.Errorf("no built-in channel %q (built-ins: %s)", args[0], strings.Join(builtin.Names(), ", "))
			}
			sdk.Serve(newChannel()) // does not return
			return nil
		},
	})
	return cmd
}
