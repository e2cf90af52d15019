package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
)

func init() { register(newSnapshotCmd) }

// snapshotTimeout is --timeout's default for save and restore: the whole
// state passes in one request.
const snapshotTimeout = 10 * time.Minute

// newSnapshotCmd is `herald snapshot`: backups of the replicated state
// (README "Backup and restore").
func newSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Back up the cluster's replicated state to a file, inspect a backup, restore one (needs an admin token)",
	}
	cmd.AddCommand(newSnapshotSaveCmd(), newSnapshotInspectCmd(), newSnapshotRestoreCmd())
	return cmd
}

// registerSnapshotFlags registers the API flags with a longer timeout.
func registerSnapshotFlags(cmd *cobra.Command, f *apiFlags) {
	f.register(cmd)
	t := cmd.PersistentFlags().Lookup("timeout")
	_ = t.Value.Set(snapshotTimeout.String())
	t.DefValue = snapshotTimeout.String()
}

func newSnapshotSaveCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "save FILE",
		Short: "Write a consistent copy of the replicated state, as of now, to FILE (through any node)",
		Long: "Streams a backup from the node at --addr, which may be a follower: every task, run, delivery,\n" +
			"pause, alert, audit record, schedule cursor and the ledger of fired slots, at one Raft index.\n" +
			"FILE is written under a temporary name and renamed once its checksum checked.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newAPIClient(f.addr, f.ca, f.timeout)
			if err != nil {
				return err
			}
			c.Token = apiToken(f.token)
			file := args[0]
			tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
			if err != nil {
				return err
			}
			defer func() { _ = os.Remove(tmp.Name()) }() // after the rename, nothing is there
			start := time.Now()
			var h cluster.BackupHeader
			err = withTimeout(cmd, f.addr, f.timeout, func(ctx context.Context) error {
				h, err = c.Backup(ctx, tmp)
				return err
			})
			if err == nil {
				err = tmp.Sync()
			}
			if cerr := tmp.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Rename(tmp.Name(), file)
			}
			if err != nil {
				return err
			}
			took := time.Since(start)
			if f.asJSON {
				return cliout.EmitJSON(cmd, h)
			}
			st, err := os.Stat(file)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "saved %s: %d bytes in %s; cluster %s at index %d (term %d), taken on %s\n",
				file, st.Size(), took.Round(time.Millisecond), h.ClusterID, h.Index, h.Term, h.NodeID)
			return nil
		},
	}
	registerSnapshotFlags(cmd, &f)
	return cmd
}

func newSnapshotInspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Read a backup file (offline): its header, its sections, its checksum verified",
		Long: "Reads FILE whole, as a restore would: the envelope, the SHA-256 checksum, and every record of\n" +
			"the state. Exits 1, saying why, when the file could not be restored. Times are shown in the\n" +
			"display zone (--tz, HERALD_TZ).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer file.Close()
			st, err := file.Stat()
			if err != nil {
				return err
			}
			info, err := cluster.InspectBackup(file)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if asJSON {
				return cliout.EmitJSON(cmd, info)
			}
			return printBackupInfo(cmd.OutOrStdout(), cmd, args[0], st.Size(), info)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")
	return cmd
}

func printBackupInfo(w io.Writer, cmd *cobra.Command, name string, size int64, info cluster.BackupInfo) error {
	h := info.Header
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "file\t%s (%d bytes)\n", name, size)
	fmt.Fprintf(tw, "checksum\tSHA-256 %s, verified\n", info.SHA256)
	fmt.Fprintf(tw, "cluster\t%s\n", h.ClusterID)
	fmt.Fprintf(tw, "raft\tindex %d, term %d (taken on %s)\n", h.Index, h.Term, h.NodeID)
	fmt.Fprintf(tw, "fsm version\t%d\n", h.FSMVersion)
	fmt.Fprintf(tw, "build\t%s\n", h.Build)
	fmt.Fprintf(tw, "created\t%s (%s)\n", showTime(cmd, h.Created), zoneOf(cmd))
	fmt.Fprintf(tw, "state\tsnapshot version %d, %d bytes\n", info.State.Version, h.Size)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "SECTION\tRECORDS\tBYTES\t\n")
	for _, s := range info.State.Sections {
		bytes := "-" // a version-1 snapshot is one document
		if s.Bytes > 0 {
			bytes = fmt.Sprint(s.Bytes)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t\n", s.Name, s.Count, bytes)
	}
	return tw.Flush()
}

func newSnapshotRestoreCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace the whole state of the running cluster at --addr with FILE's, cluster wide",
		Long: "Sends FILE to the node at --addr (a follower forwards it to the leader). The leader checks the\n" +
			"whole file (checksum, FSM version, every record) before anything changes, then replaces the\n" +
			"state of every member through Raft. The cluster keeps its own members and addresses; every\n" +
			"task, run, delivery, pause, alert, audit record, cursor and fired slot is the backup's, and\n" +
			"what this cluster held before is gone. Not retried.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Checked here first, so a damaged file is not sent at all (the
			// leader checks it again).
			if err := verifyBackupFile(args[0]); err != nil {
				return err
			}
			file, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer file.Close()
			c, err := newAPIClient(f.addr, f.ca, f.timeout)
			if err != nil {
				return err
			}
			c.Token = apiToken(f.token)
			var out cluster.RestoreAnswer
			err = withTimeout(cmd, f.addr, f.timeout, func(ctx context.Context) error {
				out, err = c.Restore(ctx, file)
				return err
			})
			if err != nil {
				return err
			}
			if f.asJSON {
				return cliout.EmitJSON(cmd, out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s: the state of cluster %s at index %d (created %s), now at index %d\n",
				args[0], out.Backup.ClusterID, out.Backup.Index, showTime(cmd, out.Backup.Created), out.Index)
			return nil
		},
	}
	registerSnapshotFlags(cmd, &f)
	return cmd
}

// verifyBackupFile checks a backup's envelope and checksum (not its
// records: the leader reads those).
func verifyBackupFile(name string) error {
	file, err := os.Open(name)
	if err != nil {
		return err
	}
	defer file.Close()
	_, state, err := cluster.OpenBackup(file)
	if err == nil {
		_, err = io.Copy(io.Discard, state)
	}
	if err != nil {
		return fmt.Errorf("%s: nothing was sent: %w", name, err)
	}
	return nil
}
