//go:build !linux

package rules

import (
	"fmt"
	"os"
	"time"
)

// fileStamp: see stamp_linux.go. Without an inode and a change time, a
// copy that keeps the old modification time and size is seen at the next
// full read (fullReadInterval).
func fileStamp(path string, fi os.FileInfo) (string, time.Time) {
	return fmt.Sprintf("%s %d %o %d", path, fi.Size(), fi.Mode(), fi.ModTime().UnixNano()), fi.ModTime()
}
