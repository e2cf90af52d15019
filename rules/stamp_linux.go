//go:build linux

package rules

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// fileStamp is what a stat says of the file at path (resolved) that a
// change of its content changes too, and the latest of its modification
// and change times. The change time is there for a copy that keeps the
// old modification time (cp -p, rsync -t, tar x over the same inode).
func fileStamp(path string, fi os.FileInfo) (string, time.Time) {
	mod := fi.ModTime()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Sprintf("%s %d %o %d", path, fi.Size(), fi.Mode(), mod.UnixNano()), mod
	}
	changed := time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	return fmt.Sprintf("%s %d %d %d %o %d %d", path, st.Dev, st.Ino, fi.Size(), fi.Mode(), mod.UnixNano(), changed.UnixNano()),
		later(mod, changed)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
