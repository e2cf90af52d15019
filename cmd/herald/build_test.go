package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
}

// go run stamps no VCS revision; the checkout it was run from names the
// build instead, read from the repository's files in every layout git
// leaves them in, and only for a checkout of this module.
func TestCheckoutRevision(t *testing.T) {
	t.Parallel()
	const (
		mod = "github.com/heraldhq/herald"
		a   = "1efbf8d0c9d3b1a2e4f5061728394a5b6c7d8e9f"
		b   = "0123456789abcdef0123456789abcdef01234567"
	)
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "go.mod"), "// Herald\nmodule "+mod+" // the product\n\ngo 1.26\n")
	writeFile(t, filepath.Join(root, ".git", "HEAD"), "ref: refs/heads/main\n")
	writeFile(t, filepath.Join(root, ".git", "refs", "heads", "main"), a+"\n")
	sub := filepath.Join(root, "cmd", "herald")
	require.NoError(t, os.MkdirAll(sub, 0o755))

	require.Equal(t, a, checkoutRevision(root, mod))
	require.Equal(t, a, checkoutRevision(sub, mod), "from a directory inside the module")
	require.Empty(t, checkoutRevision(sub, "example.com/other"), "another module's checkout says nothing of this build")

	require.NoError(t, os.Remove(filepath.Join(root, ".git", "refs", "heads", "main")))
	writeFile(t, filepath.Join(root, ".git", "packed-refs"), "# pack-refs with: peeled fully-peeled sorted\n"+b+" refs/heads/dev\n"+a+" refs/heads/main\n")
	require.Equal(t, a, checkoutRevision(root, mod), "a packed ref")

	writeFile(t, filepath.Join(root, ".git", "HEAD"), b+"\n")
	require.Equal(t, b, checkoutRevision(root, mod), "a detached HEAD")

	// A linked worktree (git worktree add): .git is a file, HEAD is the
	// worktree's own, refs are the main repository's.
	wt := filepath.Join(t.TempDir(), "wt")
	writeFile(t, filepath.Join(wt, "go.mod"), "module "+mod+"\n")
	writeFile(t, filepath.Join(wt, ".git"), "gitdir: "+filepath.Join(root, ".git", "worktrees", "wt")+"\n")
	writeFile(t, filepath.Join(root, ".git", "worktrees", "wt", "HEAD"), "ref: refs/heads/feature\n")
	writeFile(t, filepath.Join(root, ".git", "worktrees", "wt", "commondir"), "../..\n")
	writeFile(t, filepath.Join(root, ".git", "refs", "heads", "feature"), b+"\n")
	require.Equal(t, b, checkoutRevision(wt, mod))

	writeFile(t, filepath.Join(root, ".git", "HEAD"), "garbage\n")
	require.Empty(t, checkoutRevision(root, mod), "what is not a commit id names nothing")
	require.Empty(t, checkoutRevision(t.TempDir(), mod), "no module at all")
}

// The real checkout these tests run in reads as git itself reads it.
func TestCheckoutRevisionOfThisCheckout(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("not a git checkout, or no git: ", err)
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(string(out)), checkoutRevision(wd, "github.com/heraldhq/herald"))
}
