package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
	"github.com/heraldhq/herald/engine/api"
)

// newRulesFireCmd is `herald rules fire`: a slot fired by hand through a
// running node (the other rules commands only read a directory).
func newRulesFireCmd() *cobra.Command {
	var f apiFlags
	var slot string
	cmd := &cobra.Command{
		Use:   "fire NAME [--slot TIME]",
		Short: "Fire a slot of a scheduled rule by hand (a backfill), still once per slot",
		Long: `Fire a rule's slot through the node at --addr. Without --slot the slot is now
(to the second); with it, that instant (RFC 3339), e.g. a slot that was skipped
beyond its catch-up window. A slot that already fired is refused: a slot fires
once, whether the scheduler or a person fires it.`,
		Example: "  herald rules fire daily_report --slot 2026-12-01T09:00:00+08:00",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.FireRequest{Note: whoAmI()}
			var err error
			if req.Slot, err = wireTime(cmd, "--slot", slot); err != nil {
				return err
			}
			var out api.FireResponse
			path := "/v1/rules/" + url.PathEscape(args[0]) + "/fire"
			if slot != "" {
				// A slot fires once however often it is sent: safe to
				// repeat while the cluster elects a leader.
				if err := f.call(cmd, http.MethodPost, path, req, &out); err != nil {
					return err
				}
			} else if err := f.callOnce(cmd, http.MethodPost, path, req, &out); err != nil {
				return fireNowUnconfirmed(err, args[0])
			}
			if f.asJSON {
				return cliout.EmitJSON(cmd, out)
			}
			if out.Backfilled != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "fired %s slot %s (it was %s): run %s\n", out.Rule, showTime(cmd, out.Slot), out.Backfilled, out.Run)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "fired %s slot %s: run %s\n", out.Rule, showTime(cmd, out.Slot), out.Run)
			}
			if out.Paused {
				fmt.Fprintf(cmd.OutOrStdout(), "rule %s is paused: its messages wait until herald rules resume %s\n", out.Rule, out.Rule)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&slot, "slot", "", `the slot to fire: RFC 3339, or "YYYY-MM-DD HH:MM[:SS]" in the display zone (default: now)`)
	return cmd
}

// fireNowUnconfirmed adds to the error of a fire without --slot what to do
// when it may have applied (a 503, or no answer in time): it is not
// repeated, because a repeat is another run, sent to everyone again.
func fireNowUnconfirmed(err error, rule string) error {
	var ae *cluster.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w\nit may have fired, so it was not repeated: look at `herald deliveries list --rule %s` before firing again", err, rule)
	}
	return err
}
