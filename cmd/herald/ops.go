package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
	"github.com/heraldhq/herald/engine/api"
)

// whoAmI names the person at this terminal for the log of who paused,
// resumed, fired or retried: user@host.
func whoAmI() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	switch {
	case name == "" && host == "":
		return ""
	case host == "":
		return name
	}
	return name + "@" + host
}

func newRulesPauseCmd() *cobra.Command {
	var f apiFlags
	var reason string
	cmd := &cobra.Command{
		Use:   "pause NAME [--reason TEXT]",
		Short: "Pause a rule cluster wide: its slots are recorded as paused, its unsent messages parked",
		Long: `Pause a rule through the node at --addr. While it is paused its slots are
recorded as "paused" (in runs and stats, never silently missing), its messages
not yet sent are parked, and its API tasks' messages wait. The pause is
replicated: it survives leader changes and restarts. Resume with
herald rules resume NAME.`,
		Example: `  herald rules pause daily_report --reason "Spring Festival"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out api.PauseView
			if err := f.call(cmd, http.MethodPost, "/v1/rules/"+url.PathEscape(args[0])+"/pause", api.PauseRequest{Reason: reason, Note: whoAmI()}, &out); err != nil {
				return err
			}
			if f.asJSON {
				return cliout.EmitJSON(cmd, out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rule %s paused at %s by %s", out.Rule, showTime(cmd, out.PausedAt), out.PausedBy)
			if out.Reason != "" {
				fmt.Fprintf(cmd.OutOrStdout(), ": %s", out.Reason)
			}
			if out.Note != "" {
				fmt.Fprintf(cmd.OutOrStdout(), " (note: %s)", out.Note)
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why (shown in status and the dashboard)")
	return cmd
}

func newRulesResumeCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "resume NAME",
		Short: "Resume a paused rule: parked messages still inside their deadline go out",
		Long: `Resume a paused rule. Its parked messages still inside their deadline go out;
those past it expire (alerted). Slots that came while it was paused are not
sent unless fired by hand: herald rules fire NAME --slot T.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out api.PauseView
			if err := f.call(cmd, http.MethodPost, "/v1/rules/"+url.PathEscape(args[0])+"/resume", api.ResumeRequest{Note: whoAmI()}, &out); err != nil {
				return err
			}
			if f.asJSON {
				return cliout.EmitJSON(cmd, out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rule %s resumed\n", out.Rule)
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

func newDeliveriesRetryCmd(f *apiFlags) *cobra.Command {
	var run, rule, state, since string
	var deadline time.Duration
	cmd := &cobra.Command{
		Use:   "retry ID... | --run KEY | --rule R --state failed|expired [--since T]",
		Short: "Send failed or expired deliveries again, by hand",
		Long: `Send failed or expired deliveries again. Each keeps its id and idempotency key
(the channel's duplicate check still applies), gets a fresh attempt budget and
a new deadline (--deadline from now, default 2h), and records who retried it.
A delivery that was sent is never sent again; one still pending is left
alone. IDs may be unique prefixes of 8 or more characters.`,
		Example: `  herald deliveries retry 6820f695ccfc
  herald deliveries retry --rule daily_report --state failed --since "2026-11-30 00:00"
  herald deliveries retry --run daily_report@2026-11-30T01:00:00Z --deadline 4h`,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.RetryRequest{IDs: args, Run: run, Rule: rule, State: state, Note: whoAmI(), Deadline: deadline.String()}
			if deadline <= 0 {
				return fmt.Errorf("--deadline: %s is not ahead; want a positive duration such as 2h (from now)", deadline)
			}
			var err error
			if req.Since, err = wireTime(cmd, "--since", since); err != nil {
				return err
			}
			if !api.OneSelector(args, run, rule) {
				return errors.New("give delivery ids, or --run KEY, or --rule R --state failed|expired")
			}
			var out api.RetryResponse
			if err := f.call(cmd, http.MethodPost, "/v1/deliveries/retry", req, &out); err != nil {
				return err
			}
			if f.asJSON {
				return cliout.EmitJSON(cmd, out)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%d retried (new deadline %s)", len(out.Retried), showTime(cmd, out.Deadline))
			if len(out.Retried) > 0 {
				short := make([]string, len(out.Retried))
				for i, id := range out.Retried {
					short[i] = id[:min(12, len(id))]
				}
				fmt.Fprintf(w, ": %s", strings.Join(short, " "))
			}
			fmt.Fprintln(w)
			for _, s := range out.Skipped {
				fmt.Fprintf(w, "not retried %s: %s\n", s.ID[:min(12, len(s.ID))], s.Reason)
			}
			if len(out.Retried) == 0 && len(out.Skipped) > 0 {
				return errors.New("nothing was retried")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "retry this run's failed and expired deliveries")
	cmd.Flags().StringVar(&rule, "rule", "", "retry this rule's deliveries in --state")
	cmd.Flags().StringVar(&state, "state", "", "failed or expired (with --rule; with --run it narrows)")
	cmd.Flags().StringVar(&since, "since", "", `only those that ended at or after this time (RFC 3339, or "YYYY-MM-DD HH:MM" in --tz)`)
	cmd.Flags().DurationVar(&deadline, "deadline", api.DefaultRetryDeadline, "new deadline, from now")
	return cmd
}
