package main

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/heraldhq/herald/engine"
)

// init names this binary's build in member records, status and the message
// a node stops with: the VCS revision Go stamped into the binary (with
// "-dirty" for uncommitted changes), else the module version, else — for
// `go run` from a checkout, which Go does not stamp — "devel-" and the
// checkout's revision, else "devel".
func init() { engine.Build = buildName() }

func buildName() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		if v := info.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		// go run builds from the working tree just before it starts, so
		// the checkout around the working directory is what runs — based
		// on that revision, perhaps with changes not committed, which
		// "devel-" admits. Only a checkout of this very module counts.
		if wd, err := os.Getwd(); err == nil {
			if rev := checkoutRevision(wd, info.Main.Path); rev != "" {
				return "devel-" + short(rev)
			}
		}
		return "devel"
	}
	rev = short(rev)
	if dirty {
		rev += "-dirty"
	}
	return rev
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// checkoutRevision is the commit checked out in the git work tree whose
// module root encloses dir, when that module is modulePath; "" when there
// is none or it cannot be read. It reads the repository's files (HEAD, the
// ref, packed-refs; a linked worktree's gitdir and commondir) and runs no
// git.
func checkoutRevision(dir, modulePath string) string {
	root := dir
	for {
		if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err == nil {
			if modulePathOf(b) != modulePath || modulePath == "" {
				return ""
			}
			break
		}
		up := filepath.Dir(root)
		if up == root {
			return ""
		}
		root = up
	}
	gitDir := filepath.Join(root, ".git")
	if fi, err := os.Stat(gitDir); err != nil {
		return ""
	} else if !fi.IsDir() {
		// A linked worktree: .git is a file naming its git directory.
		b, err := os.ReadFile(gitDir)
		d, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
		if err != nil || !ok {
			return ""
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(root, d)
		}
		gitDir = d
	}
	common := gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		common = strings.TrimSpace(string(b))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
	}
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return ""
	}
	ref, isRef := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
	if !isRef {
		return hexOrEmpty(ref) // detached
	}
	for _, d := range []string{gitDir, common} {
		if b, err := os.ReadFile(filepath.Join(d, filepath.FromSlash(ref))); err == nil {
			return hexOrEmpty(strings.TrimSpace(string(b)))
		}
	}
	packed, err := os.ReadFile(filepath.Join(common, "packed-refs"))
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(packed)) {
		if sha, name, ok := strings.Cut(strings.TrimSpace(line), " "); ok && name == ref {
			return hexOrEmpty(sha)
		}
	}
	return ""
}

// modulePathOf reads the module directive of a go.mod.
func modulePathOf(gomod []byte) string {
	for line := range strings.Lines(string(gomod)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			rest, _, _ = strings.Cut(rest, "//")
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// hexOrEmpty is s when it is a full commit id (SHA-1 or SHA-256).
func hexOrEmpty(s string) string {
	if len(s) != 40 && len(s) != 64 {
		return ""
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return ""
		}
	}
	return s
}

// exitUnreadable is the exit status of a node that met a log entry its
// build cannot apply (EX_SOFTWARE would blame the program; this is a
// deployment problem: EX_CONFIG).
const exitUnreadable = 78

// exitSnapshotUnreadable is the exit status of a node whose snapshot did
// not read past its header (engine.RestoreError): EX_IOERR, a damaged
// file or stream.
const exitSnapshotUnreadable = 74

// newFSM is the node's state machine. A command it cannot read stops the
// process with one clear line (which command, which build can read it)
// instead of a panic's stack trace from inside Raft's apply loop.
func newFSM(log *slog.Logger) *engine.FSM {
	f := engine.NewFSM()
	f.SetHalt(func(err error) {
		msg, code := "stopping: the replicated log holds a command this build cannot apply", exitUnreadable
		if errors.As(err, new(*engine.RestoreError)) {
			// The snapshot's body failed after its header read: a damaged
			// file or stream, not a build too old for it.
			msg, code = "stopping: a snapshot did not read after this node let its state go for it", exitSnapshotUnreadable
		}
		log.Error(msg, "err", err)
		_, _ = os.Stderr.WriteString(err.Error() + "\n") // exiting: nowhere to report a failed write
		os.Exit(code)
	})
	return f
}
