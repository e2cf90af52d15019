package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cluster"
)

func init() { register(newTLSCmd) }

func newTLSCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Create the certificates a TLS cluster uses",
	}
	var dir, nodes, hosts, shared string
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Write a CA and one certificate per node",
		Long: `Write a CA (DIR/ca.pem, DIR/ca-key.pem) and, for each node, a certificate
and key signed by it (DIR/NODE.pem, DIR/NODE-key.pem), good for serving and
for mutual-TLS Raft. Each node certificate names the node, its own --hosts
entries (NODE=HOST: the IP addresses and DNS names the nodes and clients use
to reach that node) and every --shared-hosts entry (names all nodes answer
to: a load balancer; 127.0.0.1 and localhost for a cluster on one machine).
A host given to one node only is in no other node's certificate, so no node
can pass for another there. Keys are ECDSA P-256, written 0600.

A CA already in DIR is reused: run it again to add a node or to renew
certificates. Running nodes pick up changed files without a restart.
Keep ca-key.pem away from the nodes: they need only ca.pem.`,
		Example: `  herald tls init --dir ./tls --nodes n1,n2,n3 --hosts n1=10.0.0.11,n2=10.0.0.12,n3=10.0.0.13
  herald tls init --dir ./tls --nodes n1,n2,n3 --shared-hosts 127.0.0.1,localhost   # three nodes on one machine`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("--dir is required")
			}
			res, err := cluster.InitTLS(dir, splitList(nodes), splitList(hosts), splitList(shared), time.Now())
			if err != nil {
				return err
			}
			if res.CAReused {
				fmt.Fprintf(cmd.OutOrStdout(), "reused the CA in %s\n", dir)
			}
			for _, f := range res.Files {
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", f)
			}
			return nil
		},
	}
	initCmd.Flags().StringVar(&dir, "dir", "", "directory to write the files to")
	initCmd.Flags().StringVar(&nodes, "nodes", "", "node names, comma separated (n1,n2,n3)")
	initCmd.Flags().StringVar(&hosts, "hosts", "", "each node's own IP addresses and DNS names, NODE=HOST, comma separated (n1=10.0.0.11,n2=10.0.0.12)")
	initCmd.Flags().StringVar(&shared, "shared-hosts", "", "IP addresses and DNS names in every node certificate, comma separated (127.0.0.1,localhost for nodes on one machine)")
	cmd.AddCommand(initCmd)
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
