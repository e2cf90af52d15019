package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cluster"
)

// newClusterRecoverCmd is `herald cluster recover`: the one cluster
// command that talks to no node. It rewrites a stopped node's data dir, so
// it needs no token: whoever may write the data dir may run it.
func newClusterRecoverCmd() *cobra.Command {
	var (
		dataDir, nodeID string
		voters          []string
	)
	cmd := &cobra.Command{
		Use:   "recover --data-dir DIR [--voter ID=RAFT_ADDR ...]",
		Short: "After a lost quorum: make a stopped survivor the cluster's only voter (offline)",
		Long: `When most voters are gone for good the cluster cannot commit anything, not
even the removal of the dead. Stop a surviving node, then run this on its data
dir: its Raft configuration becomes this node alone (or with the other
survivors named by --voter), every entry it holds is kept, the cluster id
stays. Start it again as before (no --bootstrap, no --join): it leads. Then add
fresh nodes with empty data dirs: herald agent --join ADDR, or herald cluster
join. See README, "Lost quorum".

Use it only when the other members will not come back: a recovered node beside
a live old majority makes two clusters. With several survivors, stop them all
and run this on each with the same --voter list (every survivor, this one
included or not). Entries a survivor never received are lost; the ones it had
but that were not committed yet are kept.`,
		Example: `  herald cluster recover --data-dir /var/lib/herald
  herald cluster recover --data-dir /var/lib/herald --voter n1=10.0.0.1:7101 --voter n2=10.0.0.2:7101`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return fmt.Errorf("--data-dir is required: the data dir of the stopped node to recover")
			}
			cfg := cluster.RecoverConfig{DataDir: dataDir, NodeID: nodeID, Logger: newLogger("info", "")}
			for _, s := range voters {
				v, err := cluster.ParseVoter(s)
				if err != nil {
					return fmt.Errorf("--voter: %w", err)
				}
				cfg.Voters = append(cfg.Voters, v)
			}
			rec, err := cluster.Recover(cfg, newFSM(cfg.Logger))
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			cid := rec.ClusterID
			if cid == "" {
				cid = "none recorded"
			}
			fmt.Fprintf(out, "recovered %s (cluster %s) in %s\n", rec.NodeID, cid, dataDir)
			fmt.Fprintf(out, "  voters before: %s\n", voterList(rec.Old))
			fmt.Fprintf(out, "  voters now:    %s\n", voterList(rec.New))
			fmt.Fprintf(out, "  last index %d (term %d): every entry up to it is kept\n", rec.LastIndex, rec.LastTerm)
			fmt.Fprintf(out, "start the node as before (no --bootstrap or --join); once it leads, add fresh nodes with "+
				"\"herald agent --join\" or \"herald cluster join\"\n")
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "data dir of the stopped node")
	cmd.Flags().StringVar(&nodeID, "node-id", "", "the node's id, if its data dir does not record it (last run by an older build)")
	cmd.Flags().StringArrayVar(&voters, "voter", nil, "another survivor to keep as a voter, ID=RAFT_ADDR (repeat for each)")
	return cmd
}

func voterList(vs []cluster.Voter) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.String()
	}
	return strings.Join(s, " ")
}
