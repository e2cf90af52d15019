package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
)

func init() { register(newDirectoryCmd) }

func newDirectoryCmd() *cobra.Command {
	var f apiFlags
	show := func(cmd *cobra.Command, _ []string) error {
		var v api.DirectoryView
		if err := f.call(cmd, http.MethodGet, "/v1/directory", nil, &v); err != nil {
			return err
		}
		if f.asJSON {
			return cliout.EmitJSON(cmd, v)
		}
		printDirectory(cmd.OutOrStdout(), v, zoneOf(cmd))
		return nil
	}
	cmd := &cobra.Command{
		Use:   "directory",
		Short: "The WeCom directory: the snapshot in force, a held refresh, confirm it, refresh now",
		Long: `The people read from WeCom's contacts (the node config's directory: section).
The leader refreshes them every interval and replicates them through the log,
so every node plans and previews with the same snapshot. A refresh that would
remove more than max_removal (default 20%) of the people in force is held
until an operator confirms it.`,
		Args: cobra.NoArgs,
		RunE: show,
	}
	f.register(cmd)
	showCmd := &cobra.Command{Use: "show", Short: "The snapshot in force and a held refresh (the default)", Args: cobra.NoArgs, RunE: show}
	var by string
	confirm := &cobra.Command{
		Use:   "confirm [HASH]",
		Short: "Put the held refresh in force (HASH: the one the alert names; without it, whatever is held)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Who confirms is the token's name; --by is a note beside it.
			req := api.ConfirmDirectoryRequest{Note: by}
			if len(args) == 1 {
				req.Hash = args[0]
			}
			if req.Note == "" {
				req.Note = whoAmI()
			}
			var v api.DirectoryView
			if err := f.call(cmd, http.MethodPost, "/v1/directory/confirm", req, &v); err != nil {
				return err
			}
			if f.asJSON {
				return cliout.EmitJSON(cmd, v)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "held refresh confirmed; in force now:")
			printDirectory(cmd.OutOrStdout(), v, zoneOf(cmd))
			return nil
		},
	}
	confirm.Flags().StringVar(&by, "by", "", "a note for the record beside the verified confirmer (default user@host)")
	refresh := &cobra.Command{
		Use:   "refresh",
		Short: "Ask the leader to read the directory from WeCom now",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.call(cmd, http.MethodPost, "/v1/directory/refresh", struct{}{}, nil); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "refresh requested; `herald directory show` tells what came of it")
			return nil
		},
	}
	cmd.AddCommand(showCmd, confirm, refresh)
	return cmd
}

func printDirectory(w io.Writer, v api.DirectoryView, loc *time.Location) {
	zoned := func(t time.Time) string { return engine.ShowTime(t, loc) }
	line := func(what string, s *api.DirectorySummary) {
		if s == nil {
			fmt.Fprintf(w, "%s: none\n", what)
			return
		}
		fmt.Fprintf(w, "%s: %s, %d people from %s, fetched %s, since %s\n", what, s.Hash, s.People, s.Source,
			zoned(s.FetchedAt), zoned(s.AppliedAt))
		if s.ConfirmedBy != "" {
			fmt.Fprintf(w, "  confirmed by %s at %s\n", s.ConfirmedBy, zoned(s.ConfirmedAt))
			if s.Note != "" {
				fmt.Fprintf(w, "  note: %s\n", s.Note)
			}
		}
		if s.Removed > 0 {
			fmt.Fprintf(w, "  would remove %d people: %s\n", s.Removed, strings.Join(s.RemovedSample, ", "))
			fmt.Fprintf(w, "  confirm with: herald directory confirm %s\n", s.Hash)
		}
	}
	line("in force", v.InForce)
	line("held", v.Held)
	sync := "in sync"
	if !v.InSync {
		sync = "NOT in sync yet (still applying the snapshot in force)"
	}
	fmt.Fprintf(w, "node %s: %s (%s)\n", v.NodeID, orNone(v.NodeHash), sync)
	if !v.Configured {
		fmt.Fprintln(w, "note: this node's config has no directory: section (the leader's decides)")
	}
}

func orNone(s string) string {
	if s == "" {
		return "no snapshot"
	}
	return s
}

// fetchDirectorySnapshot reads the snapshot for `rules preview
// --directory`: a node's (its in force, GET /v1/directory/snapshot) or a
// file's (@path).
func fetchDirectorySnapshot(ctx context.Context, from string, timeout time.Duration) ([]byte, error) {
	if path, ok := strings.CutPrefix(from, "@"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--directory: %w", err)
		}
		return b, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := from
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(u, "/")+"/v1/directory/snapshot", nil)
	if err != nil {
		return nil, fmt.Errorf("--directory: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("--directory: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("--directory: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("--directory: %s answered %s: %s", from, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}
