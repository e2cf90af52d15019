package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/heraldhq/herald/plugins/wecomfake"
	"github.com/spf13/cobra"
)

func init() { register(newWecomFakeCmd) }

func newWecomFakeCmd() *cobra.Command {
	var addr, adminAddr, configPath string
	cmd := &cobra.Command{
		Use:   "wecom-fake",
		Short: "Run a fake WeCom server for tests and demos",
		Long: `Run a fake WeCom (企业微信) API server: gettoken, message/send,
message/recall and webhook/send, with WeCom's checks, silent per-member
limits, and fault knobs on a separate admin address (see the
plugins/wecomfake package). Without --config it serves a demo corp.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := wecomfake.Config{}
			if configPath != "" {
				var err error
				if cfg, err = wecomfake.LoadConfig(configPath); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runWecomFake(ctx, cmd, wecomfake.New(cfg), addr, adminAddr)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8180", "address of the WeCom API")
	cmd.Flags().StringVar(&adminAddr, "admin-addr", "127.0.0.1:8181", "address of the admin API (faults, records)")
	cmd.Flags().StringVar(&configPath, "config", "", "YAML or JSON file of corps, apps, members and robots (default: the demo corp)")
	return cmd
}

func runWecomFake(ctx context.Context, cmd *cobra.Command, fake *wecomfake.Server, addr, adminAddr string) error {
	apiLn, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("wecom-fake: listen %s: %w", addr, err)
	}
	adminLn, err := net.Listen("tcp", adminAddr)
	if err != nil {
		apiLn.Close()
		return fmt.Errorf("wecom-fake: listen %s: %w", adminAddr, err)
	}
	api := &http.Server{Handler: fake.Handler(), ReadHeaderTimeout: 10 * time.Second}
	admin := &http.Server{Handler: fake.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}

	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "wecom-fake API   http://%s   (base_url for the wecom channel)\n", apiLn.Addr())
	fmt.Fprintf(out, "wecom-fake admin http://%s\n", adminLn.Addr())
	for _, c := range fake.Config().Corps {
		for _, a := range c.Apps {
			fmt.Fprintf(out, "corp_id=%s agent_id=%d secret=%s\n", c.ID, a.AgentID, a.Secret)
		}
		for _, r := range c.Robots {
			fmt.Fprintf(out, "corp_id=%s robot_key=%s\n", c.ID, r.Key)
		}
		users := make([]string, 0, len(c.Members))
		for _, m := range c.Members {
			users = append(users, m.UserID)
		}
		fmt.Fprintf(out, "corp_id=%s members=%v\n", c.ID, users)
	}

	errc := make(chan error, 2)
	go func() { errc <- api.Serve(apiLn) }()
	go func() { errc <- admin.Serve(adminLn) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err = errors.Join(api.Shutdown(shutCtx), admin.Shutdown(shutCtx))
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("wecom-fake: %w", serveErr)
	}
	slog.Info("wecom-fake stopped")
	return err
}
