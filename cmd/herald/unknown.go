package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// refuseUnknownSubcommands makes every command group under root (a
// command with subcommands, such as `herald rules`) fail on a word that
// names none of them: cobra would print the group's help and exit 0, so a
// script could not tell `herald deliveries retyr X` from success. The
// group alone still prints its help.
func refuseUnknownSubcommands(root *cobra.Command) {
	for _, c := range root.Commands() {
		refuseUnknownSubcommands(c)
	}
	if !root.HasSubCommands() {
		return // a leaf validates its own args
	}
	given := root.Args
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return unknownSubcommand(cmd, args[0])
		}
		if given != nil {
			return given(cmd, args)
		}
		return nil
	}
	if !root.Runnable() {
		// cobra validates the args of runnable commands only.
		root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
}

// unknownSubcommand is the error for a word under a group that names no
// subcommand: it suggests the nearest ones, else lists them all.
func unknownSubcommand(cmd *cobra.Command, word string) error {
	msg := fmt.Sprintf("unknown command %q for %q", word, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // what cobra uses for the root
	}
	if near := cmd.SuggestionsFor(word); len(near) > 0 {
		return fmt.Errorf("%s; did you mean %s?", msg, quoteJoin(near, " or "))
	}
	var all []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			all = append(all, c.Name())
		}
	}
	return fmt.Errorf("%s; did you mean one of %s? (see %s --help)", msg, quoteJoin(all, ", "), cmd.CommandPath())
}

func quoteJoin(words []string, sep string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = fmt.Sprintf("%q", w)
	}
	return strings.Join(q, sep)
}
