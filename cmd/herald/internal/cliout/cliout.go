// Package cliout holds how herald's commands print, shared by package main
// and the commands that live in packages of their own (bench), so that
// every command's --json reads the same.
package cliout

import (
	"encoding/json"

	"github.com/spf13/cobra"
)

// EmitJSON prints v indented on the command's output. HTML escaping is off:
// a build or id with < > & reads as written, not as \u003c escapes meant for
// a browser.
func EmitJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
