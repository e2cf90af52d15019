package main

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/heraldhq/herald/engine"
)

// init names this binary's build in member records, status and the message
// a node stops with: the VCS revision Go stamped into the binary (with
// "-dirty" for uncommitted changes), else the module version.
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
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// exitUnreadable is the exit status of a node that met a log entry its
// build cannot apply (EX_SOFTWARE would blame the program; this is a
// deployment problem: EX_CONFIG).
const exitUnreadable = 78

// newFSM is the node's state machine. A command it cannot read stops the
// process with one clear line (which command, which build can read it)
// instead of a panic's stack trace from inside Raft's apply loop.
func newFSM(log *slog.Logger) *engine.FSM {
	f := engine.NewFSM()
	f.SetHalt(func(err error) {
		log.Error("stopping: the replicated log holds a command this build cannot apply", "err", err)
		_, _ = os.Stderr.WriteString(err.Error() + "\n") // exiting: nowhere to report a failed write
		os.Exit(exitUnreadable)
	})
	return f
}
