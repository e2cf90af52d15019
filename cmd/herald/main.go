// Command herald is the one Herald binary: the node agent, the local dev
// cluster, the operator CLIs, and (hidden) the built-in channel plugins.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// commands holds the constructors of the top-level subcommands. Each file in
// this package registers its own from init, so that adding a command never
// means editing this file.
var commands []func() *cobra.Command

func register(f func() *cobra.Command) { commands = append(commands, f) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "herald",
		Short:         "Herald sends timed notifications on time, to the right people, never twice",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	registerTZ(root)
	for _, f := range commands {
		root.AddCommand(f())
	}
	refuseUnknownSubcommands(root)
	return root
}

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "herald:", err)
		os.Exit(1)
	}
}
