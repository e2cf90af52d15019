package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"go.etcd.io/bbolt"

	"github.com/heraldhq/herald/cluster"
)

// compactTxSize is how much bbolt.Compact copies per transaction: a
// raft.db of gigabytes is copied in bounded memory.
const compactTxSize = 64 << 20

// newClusterCompactCmd is `herald cluster compact --data-dir DIR`: bbolt
// never gives freed pages back to the file system, so a raft.db that once
// held a large log (a burst, a member that was down long) keeps its size
// after Raft has compacted the log into a snapshot. Compaction copies the
// live pages into a new file (bbolt.Compact) and puts it in place.
func newClusterCompactCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "compact --data-dir DIR",
		Short: "Shrink a stopped node's raft.db (bbolt never shrinks it by itself)",
		Long: `Copy the live pages of DIR/raft.db into a new file and put it in place of
the old one, printing the sizes before and after. The node must be stopped:
its running agent holds the file, and compact refuses while it does (as a
second agent on the same data dir is refused). Start the node again after;
it resumes with the same log and state. One member at a time.`,
		Example: `  systemctl stop herald && herald cluster compact --data-dir /var/lib/herald && systemctl start herald`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("--data-dir is required")
			}
			before, after, err := compactRaftDB(dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s before, %s after\n", filepath.Join(dir, "raft.db"), showBytes(before), showBytes(after))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "", "the stopped node's data dir (holds raft.db)")
	return cmd
}

// compactRaftDB compacts dir's raft.db and returns its size before and
// after. The old file stays locked (as a running node holds it) until the
// compacted copy has replaced it, so no node can open either meanwhile; a
// failure leaves the old file as it was.
func compactRaftDB(dir string) (before, after int64, err error) {
	path := filepath.Join(dir, "raft.db")
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, fmt.Errorf("data dir %s: %w", dir, err)
	}
	src, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return 0, 0, fmt.Errorf("%w: %s: stop its agent first", cluster.ErrDataDirInUse, dir)
		}
		return 0, 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer src.Close()
	tmp := path + ".compact"
	_ = os.Remove(tmp) // left by an interrupted compaction
	dst, err := bbolt.Open(tmp, fi.Mode().Perm(), nil)
	if err != nil {
		return 0, 0, fmt.Errorf("create %s: %w", tmp, err)
	}
	err = bbolt.Compact(dst, src, compactTxSize)
	if cerr := dst.Close(); err == nil {
		err = cerr // Close syncs the file
	}
	if err != nil {
		_ = os.Remove(tmp)
		return 0, 0, fmt.Errorf("compact %s: %w", path, err)
	}
	nfi, err := os.Stat(tmp)
	if err != nil {
		return 0, 0, err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return 0, 0, fmt.Errorf("replace %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename itself survives a crash
		_ = d.Close()
	}
	return fi.Size(), nfi.Size(), nil
}

// showBytes is a size as people read it.
func showBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
