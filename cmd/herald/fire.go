package main

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

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
			req := api.FireRequest{By: whoAmI()}
			if slot != "" {
				t, err := parseTime(cmd, "--slot", slot)
				if err != nil {
					return err
				}
				req.Slot = t.Format(time.RFC3339Nano)
			}
			var out api.FireResponse
			if err := f.call(cmd, http.MethodPost, "/v1/rules/"+url.PathEscape(args[0])+"/fire", req, &out); err != nil {
				return err
			}
			if f.asJSON {
				return emitJSON(cmd, out)
			}
			if out.Backfilled != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "fired %s slot %s (it was %s): run %s\n", out.Rule, showTime(cmd, out.Slot), out.Backfilled, out.Run)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "fired %s slot %s: run %s\n", out.Rule, showTime(cmd, out.Slot), out.Run)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&slot, "slot", "", `the slot to fire: RFC 3339, or "YYYY-MM-DD HH:MM[:SS]" in the display zone (default: now)`)
	return cmd
}
