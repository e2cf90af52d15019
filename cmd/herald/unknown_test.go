package main

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// groups lists every command with subcommands, the root included, as the
// args that reach it.
func groups(c *cobra.Command, path []string) [][]string {
	var out [][]string
	if c.HasSubCommands() {
		out = append(out, path)
	}
	for _, sub := range c.Commands() {
		out = append(out, groups(sub, append(append([]string{}, path...), sub.Name()))...)
	}
	return out
}

// execute runs the CLI in-process with args and returns its error and
// output.
func execute(args ...string) (string, error) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// A word that names no subcommand of a group is an error that says what
// was meant, for every group; it used to print the group's help and
// succeed, so a script could not tell a typo from success.
func TestUnknownSubcommandFailsWithASuggestion(t *testing.T) {
	t.Parallel()
	all := groups(newRootCmd(), nil)
	require.GreaterOrEqual(t, len(all), 8, "root, agent's siblings with subcommands: %v", all)
	for _, g := range all {
		root := newRootCmd()
		cmd, _, err := root.Find(g)
		require.NoError(t, err)
		path := cmd.CommandPath()

		_, err = execute(append(g, "nosuch")...)
		require.Error(t, err, "%s nosuch", path)
		require.Contains(t, err.Error(), `unknown command "nosuch" for "`+path+`"; did you mean one of "`)

		// A typo of a subcommand suggests it.
		var name string
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() && len(sub.Name()) > 2 {
				name = sub.Name()
				break
			}
		}
		require.NotEmpty(t, name, path)
		typo := name[:len(name)-1] + "x"
		_, err = execute(append(g, typo, "ARG")...)
		require.Error(t, err, "%s %s", path, typo)
		require.Contains(t, err.Error(), `unknown command "`+typo+`" for "`+path+`"; did you mean "`+name+`"`)
	}

	// A group alone still shows its help and succeeds.
	for _, g := range [][]string{nil, {"rules"}, {"cluster"}, {"task"}} {
		out, err := execute(g...)
		require.NoError(t, err, "%v", g)
		require.Contains(t, out, "Available Commands:", "%v", g)
	}
}

// The binary exits non-zero on an unknown subcommand and says so on stderr.
func TestUnknownSubcommandExitStatus(t *testing.T) {
	t.Parallel()
	if heraldBin == "" {
		t.Skip("needs the herald binary; skipped with -short")
	}
	for _, args := range [][]string{{"rules", "nosuch"}, {"deliveries", "retyr", "X"}, {"cluster", "stauts"}} {
		var stderr bytes.Buffer
		cmd := exec.Command(heraldBin, args...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%v: want a non-zero exit, got %v", args, err)
		require.Equal(t, 1, exit.ExitCode(), "%v", args)
		require.True(t, strings.HasPrefix(stderr.String(), `herald: unknown command "`+args[1]+`"`), "%v: %s", args, stderr.String())
		require.Contains(t, stderr.String(), "did you mean", "%v", args)
	}
}
