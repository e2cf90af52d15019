package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/plugins/host"
)

func init() { register(newAgentCmd) }

func newAgentCmd() *cobra.Command {
	var cfg nodeConfig
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a Herald node",
		Long: `Run a Herald node. The first node of a new cluster starts with --bootstrap;
the others with --join HTTP_ADDR of any member. A restarted node rejoins with
its data and never bootstraps again.`,
		Example: `  herald agent --node-id n1 --data-dir ./n1 --raft-addr 127.0.0.1:7101 --http-addr 127.0.0.1:8101 --bootstrap --rules ./rules
  herald agent --node-id n2 --data-dir ./n2 --raft-addr 127.0.0.1:7102 --http-addr 127.0.0.1:8102 --join 127.0.0.1:8101 --rules ./rules`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.load(cmd); err != nil {
				return err
			}
			// One level for every handler, so that a reload's log_level
			// applies whatever the handler (reload.go).
			cfg.logLevel = new(slog.LevelVar)
			cfg.logLevel.Set(parseLogLevel(cfg.LogLevel))
			log := newLoggerAt(cfg.logLevel, cfg.LogFormat).With("node", cfg.NodeID)
			routeLibraryLogs(log)
			// Before any plugin starts: no process of this user may read
			// the tokens and secrets in this one's environment or memory.
			if err := host.HideProcess(); err != nil {
				log.Warn("could not make the agent non-dumpable: processes of its user (its plugins among them) can read its environment", "err", err)
			}
			log.Info("herald starting", "version", readVersion().String)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// SIGHUP reloads the config (systemd's ExecReload=kill -HUP).
			// Asked for before the node starts: a SIGHUP during the start
			// waits for it instead of killing the process.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			applyGCPercent(cfg, log)
			n, err := startNode(ctx, cfg, log)
			if err != nil {
				return logged(log, cfg.LogFormat, err)
			}
			log.Info("node running", "raft", cfg.RaftAddr, "http", cfg.HTTPAddr, "rules", n.cfg.Rules)
		wait:
			for {
				select {
				case <-ctx.Done():
					break wait
				case <-hup:
					log.Info("SIGHUP: reloading the config")
					n.reloadFrom(cmd)
				case <-n.raft.Failed():
					// The node must not go on (its data dir is another
					// cluster's): stop, and exit with the reason.
					n.stop()
					return logged(log, cfg.LogFormat, n.raft.Err())
				}
			}
			log.Info("stopping")
			n.stop()
			return nil
		},
	}
	cfg.bindFlags(cmd)
	return cmd
}
