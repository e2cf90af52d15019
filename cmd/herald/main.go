// Command herald is the one Herald binary: the node agent, the local dev
// cluster, the operator CLIs, and (hidden) the built-in channel plugins.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cluster"
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
		// herald --version: the line `herald version` prints.
		Version: readVersion().String,
	}
	registerTZ(root)
	for _, f := range commands {
		root.AddCommand(f())
	}
	refuseUnknownSubcommands(root)
	return root
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run executes one command line and returns the exit code. An error is
// printed as "herald: REASON" on stderr; for a command asked for --json,
// also as {"error": REASON, "status": HTTP status when a node answered} on
// stdout, so a script that reads stdout always reads JSON.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var le *loggedError
	if !errors.As(err, &le) {
		fmt.Fprintln(stderr, "herald:", err)
	}
	if f := cmd.Flag("json"); f != nil && f.Value.String() == "true" {
		body := map[string]any{"error": err.Error()}
		var ae *cluster.APIError
		if errors.As(err, &ae) {
			body["status"] = ae.Status
		}
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(body)
	}
	return 1
}
