package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/rules"
)

func init() { register(newDevCmd) }

// devNodes is the local cluster `herald dev` runs: fixed, documented ports.
var devNodes = []struct{ id, raft, http string }{
	{"n1", "127.0.0.1:7101", "127.0.0.1:8101"},
	{"n2", "127.0.0.1:7102", "127.0.0.1:8102"},
	{"n3", "127.0.0.1:7103", "127.0.0.1:8103"},
}

func newDevCmd() *cobra.Command {
	var dataDir, logLevel string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local three-node cluster with the example rules and the mock channel",
		Long: `Run three Herald nodes in one process (Raft 127.0.0.1:7101-7103, HTTP
127.0.0.1:8101-8103). On first run the example rules are written to
DATA_DIR/rules, where all three nodes watch them: edit them and see the
change. Messages go to the mock channel, whose outbox is DATA_DIR/outbox.jsonl.
Stop with Ctrl-C; run again to restart with the same data.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd.Context(), dataDir, logLevel)
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", ".herald-dev", "where the three nodes keep their data, the rules and the outbox")
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error")
	return cmd
}

func runDev(ctx context.Context, dataDir, logLevel string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	dataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	rulesDir := filepath.Join(dataDir, "rules")
	if err := writeExamples(rulesDir); err != nil {
		return err
	}
	outbox := filepath.Join(dataDir, "outbox.jsonl")
	channels := map[string]map[string]any{"mock": {"plugin": "mock", "outbox": outbox}}

	var nodes []*node
	defer func() {
		for i := len(nodes) - 1; i >= 0; i-- {
			nodes[i].stop()
		}
	}()
	for i, d := range devNodes {
		cfg := nodeConfig{
			NodeID: d.id, DataDir: filepath.Join(dataDir, d.id), RaftAddr: d.raft, HTTPAddr: d.http,
			Rules: rulesDir, Channels: channels, LogLevel: logLevel, devTimeouts: true,
		}
		if i == 0 {
			cfg.Bootstrap = true
		} else {
			cfg.Join = devNodes[0].http
		}
		n, err := startNode(ctx, cfg, newLogger(logLevel).With("node", d.id))
		if err != nil {
			return fmt.Errorf("node %s: %w", d.id, err)
		}
		nodes = append(nodes, n)
	}
	fmt.Printf(`Herald dev cluster is up: three nodes, one leader.

  HTTP API     http://%s  http://%s  http://%s   (GET /v1/status, /metrics)
  Raft         %s  %s  %s
  Rules        %s   (edit a .lua file: it reloads; a broken one keeps the last good version)
  Outbox       %s   (the mock channel: one JSON line per message)
  Data         %s

Try, from another terminal:
  go run ./cmd/herald cluster status
  tail -f %s
  go run ./cmd/herald deliveries list

Join a fourth node:
  go run ./cmd/herald agent --node-id n4 --data-dir %s --raft-addr 127.0.0.1:7104 \
    --http-addr 127.0.0.1:8104 --join %s --rules %s

Ctrl-C stops all three nodes.
`, devNodes[0].http, devNodes[1].http, devNodes[2].http, devNodes[0].raft, devNodes[1].raft, devNodes[2].raft,
		rulesDir, outbox, dataDir, outbox, filepath.Join(dataDir, "n4"), devNodes[0].http, rulesDir)
	<-ctx.Done()
	fmt.Println("\nstopping…")
	return nil
}

// writeExamples writes the embedded example rules and people file into dir
// the first time; later runs keep the user's edits.
func writeExamples(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.CopyFS(dir, rules.ExamplesFS())
}
