package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
	"github.com/heraldhq/herald/engine/backoff"
)

func init() { register(newClusterCmd) }

// clusterDefaultAddr is the HTTP address of a node started with defaults.
const clusterDefaultAddr = "127.0.0.1:8101"

func newClusterCmd() *cobra.Command {
	var (
		addr, ca, token string
		timeout         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect and change cluster membership through any node",
		Long: `Talk to any node's HTTP API: it forwards membership changes to the leader.

  herald cluster status                    who is in the cluster, who leads
  herald cluster join --addr MEMBER --http-addr NEW
                                           add a running node that is not in a cluster yet
  herald cluster join --id ID --raft-addr A --http-addr H
                                           add a member by its addresses
  herald cluster leave --addr NODE         the node at --addr leaves
  herald cluster remove ID                 remove a member (e.g. a dead machine)
  herald cluster readmit ID                let a removed member join again
  herald cluster promote ID                make a non-voter (read replica) a voter
  herald cluster recover --data-dir DIR    after a lost quorum, on a stopped survivor:
                                           make it the only voter (offline)
  herald cluster transfer-leader [ID]      hand leadership to ID (or to any voter) before a planned stop
  herald cluster compact --data-dir DIR    shrink a stopped node's raft.db

A new node usually joins on its own with "herald agent --join MEMBER".`,
	}
	cmd.PersistentFlags().StringVar(&addr, "addr", clusterDefaultAddr, "address of any Herald node: host:port, http://host:port or https://host:port")
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	registerToken(cmd, &token)
	registerCA(cmd, &ca)
	clientFor := func(a string) (*cluster.Client, error) {
		c, err := newAPIClient(a, ca, timeout)
		if err != nil {
			return nil, err
		}
		// A join needs the cluster secret's proof when the cluster has one.
		if v, ok := os.LookupEnv("HERALD_CLUSTER_SECRET"); ok && v != "" {
			if c.Secret, err = resolveSecret("HERALD_CLUSTER_SECRET", v, true); err != nil {
				return nil, err
			}
		}
		c.Token = apiToken(token)
		return c, nil
	}
	// call runs f with a client of the node at --addr, within --timeout.
	call := func(cmd *cobra.Command, f func(context.Context, *cluster.Client) error) error {
		c, err := clientFor(addr)
		if err != nil {
			return err
		}
		return withTimeout(cmd, addr, timeout, func(ctx context.Context) error { return f(ctx, c) })
	}

	var asJSON bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the members, their addresses and the leader",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st cluster.Status
			if err := call(cmd, func(ctx context.Context, c *cluster.Client) (err error) {
				st, err = c.Status(ctx)
				return err
			}); err != nil {
				return err
			}
			if asJSON {
				return cliout.EmitJSON(cmd, st)
			}
			return st.WriteTable(cmd.OutOrStdout())
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")

	var req cluster.JoinRequest
	join := &cobra.Command{
		Use:   "join",
		Short: "Add a node to the cluster (through the member at --addr)",
		Long: `Add a node as a voter (with --non-voter: a read replica that replicates and
serves reads but never votes or leads, until herald cluster promote). Give --id, --raft-addr and --http-addr; or give only
--http-addr of a running node that is not in a cluster yet, and its id and
Raft address are asked from it. The same id at a new address replaces the
old entry; the same id at the same address changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if req.HTTPAddr == "" {
				return errors.New("--http-addr is required")
			}
			if req.ID == "" || req.RaftAddr == "" {
				// Ask the new node who it is.
				nc, err := clientFor(req.HTTPAddr)
				if err != nil {
					return err
				}
				var st cluster.Status
				if err := withTimeout(cmd, req.HTTPAddr, timeout, func(ctx context.Context) (err error) {
					st, err = nc.Status(ctx)
					return err
				}); err != nil {
					return fmt.Errorf("give --id and --raft-addr, or start the node first: %w", err)
				}
				if req.ID == "" {
					req.ID = st.NodeID
				}
				if req.RaftAddr == "" {
					req.RaftAddr = st.RaftAddr
				}
			}
			if ca != "" && !strings.Contains(req.HTTPAddr, "://") {
				req.HTTPAddr = "https://" + req.HTTPAddr // what the members will dial
			}
			if err := call(cmd, func(ctx context.Context, c *cluster.Client) error {
				return whileElecting(ctx, func() error { return c.Join(ctx, req) })
			}); err != nil {
				return err
			}
			kind := "a member"
			if req.NonVoter {
				kind = "a non-voting member"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s (raft %s, http %s) is %s\n", req.ID, req.RaftAddr, req.HTTPAddr, kind)
			return nil
		},
	}
	join.Flags().StringVar(&req.ID, "id", "", "node id of the new member")
	join.Flags().StringVar(&req.RaftAddr, "raft-addr", "", "Raft address of the new member (host:port)")
	join.Flags().StringVar(&req.HTTPAddr, "http-addr", "", "HTTP address of the new member (host:port)")
	join.Flags().BoolVar(&req.NonVoter, "non-voter", false, "add it as a non-voter (a read replica; herald cluster promote makes it a voter)")

	promote := &cobra.Command{
		Use:   "promote ID",
		Short: "Make non-voter ID a voter (needs an admin token)",
		Long: `A non-voter (joined with --non-voter or non_voter: true) replicates and serves
reads but never votes or leads. Promote it once it has caught up: the leader
refuses one that does not answer or lags (409), an unknown id (404) and a
voter (409). Recorded in the audit trail.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := call(cmd, func(ctx context.Context, c *cluster.Client) error {
				return whileElecting(ctx, func() error { return c.Promote(ctx, args[0]) })
			}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is a voter\n", args[0])
			return nil
		},
	}

	leave := &cobra.Command{
		Use:   "leave",
		Short: "Make the node at --addr leave the cluster (a leader hands over first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := call(cmd, func(ctx context.Context, c *cluster.Client) error {
				return whileElecting(ctx, func() error { return c.Leave(ctx) })
			}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "the node at %s left the cluster; stop its agent now\n", addr)
			return nil
		},
	}

	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a member by id (through the node at --addr)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := call(cmd, func(ctx context.Context, c *cluster.Client) error {
				return whileElecting(ctx, func() error { return c.Remove(ctx, args[0]) })
			}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", args[0])
			return nil
		},
	}

	readmit := &cobra.Command{
		Use:   "readmit ID",
		Short: "Let a removed member join again (needs an admin token)",
		Long: `A removed member (remove, or leave) is refused on join and on the Raft port by
every member, whatever secret, token or certificate it still holds. Readmit
its id to let it join again (recorded in the audit trail).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := call(cmd, func(ctx context.Context, c *cluster.Client) error {
				return whileElecting(ctx, func() error { return c.Readmit(ctx, args[0]) })
			}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s may join again\n", args[0])
			return nil
		},
	}

	transfer := &cobra.Command{
		Use:   "transfer-leader [ID]",
		Short: "Hand leadership to member ID, or to any other voter (needs an admin token)",
		Long: `Move leadership without an election gap: the leader brings the member up to
date and tells it to stand at once, so no slot waits for an election
timeout. Before a planned stop of the leader's machine; the agent does the
same by itself when it is stopped with SIGTERM while it leads.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out cluster.TransferResponse
			if err := call(cmd, func(ctx context.Context, c *cluster.Client) error {
				return whileElecting(ctx, func() (err error) {
					out, err = c.TransferLeader(ctx, firstArg(args))
					return err
				})
			}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s leads\n", out.Leader)
			return nil
		},
	}

	cmd.AddCommand(status, join, leave, remove, readmit, promote, transfer, newClusterRecoverCmd(), newClusterCompactCmd())
	return cmd
}

// whileElecting retries a membership change while the cluster answers 503
// (no leader yet, or one is being elected), until ctx ends. Other errors,
// a node that does not answer included, are reported at once. When ctx
// ends during a repeat, the node's last reason is reported, not "context
// deadline exceeded".
func whileElecting(ctx context.Context, f func() error) error {
	b := backoff.Doubling{Min: 100 * time.Millisecond, Max: time.Second}
	var last error
	for {
		err := f()
		if last != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return last
		}
		var ae *cluster.APIError
		if err == nil || !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
			return err
		}
		last = err
		if !backoff.Sleep(ctx, b.Next(), nil) {
			return err
		}
	}
}

// firstArg is args[0], or "" when there is none.
func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
