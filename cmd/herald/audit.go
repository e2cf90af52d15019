package main

import (
	"fmt"
	"net/http"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
	"github.com/heraldhq/herald/engine/api"
)

func init() { register(newAuditCmd) }

// newAuditCmd is `herald audit`: the audit trail, newest first, a page at
// a time (an admin token: the trail says who holds which token).
func newAuditCmd() *cobra.Command {
	var (
		f                            apiFlags
		limit                        int
		cursor, actor, action, since string
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Who changed what through the API: the audit trail, newest first (needs an admin token)",
		Long: "Every write the API accepted (tasks, fires, acks, pauses, retries, membership) with who made it\n" +
			"(the token's name, or loopback), from where, when, and what it acted on. Records are kept 90 days\n" +
			"(audit_retention). Times are shown in the display zone (--tz, HERALD_TZ).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := listQuery(cmd, limit, map[string]string{"cursor": cursor, "actor": actor, "action": action},
				map[string]string{"since": since})
			if err != nil {
				return err
			}
			var out api.AuditResponse
			if err := f.call(cmd, http.MethodGet, "/v1/audit?"+q.Encode(), nil, &out); err != nil {
				return err
			}
			if f.asJSON {
				return cliout.EmitJSON(cmd, out)
			}
			w := cmd.OutOrStdout()
			if len(out.Records) == 0 {
				fmt.Fprintln(w, "no audit records")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "TIME (%s)\tACTOR\tREMOTE\tACTION\tTARGET\tSTATUS\tNODE\n", zoneOf(cmd))
			for _, r := range out.Records {
				remote := r.Remote
				if r.Via != "" {
					remote += " via " + r.Via
				}
				target := r.Target
				if r.Repeats > 0 {
					// Unchanged writes repeated fold into this record.
					target += fmt.Sprintf(" (+%d unchanged repeats, last %s)", r.Repeats, showTime(cmd, r.LastAt))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", showTime(cmd, r.At), r.Actor, remote, r.Action, target, r.Status, r.Node)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if out.Capped > 0 {
				fmt.Fprintf(w, "(%d older records were dropped: the trail holds at most its cap, newest kept)\n", out.Capped)
			}
			if out.NextCursor != "" {
				fmt.Fprintf(w, "more: herald audit --cursor %s\n", out.NextCursor)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&limit, "limit", 50, "records per page (1 to 1000)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "the page after the one that printed this cursor")
	cmd.Flags().StringVar(&actor, "actor", "", "only this actor (a token's name, or loopback)")
	cmd.Flags().StringVar(&action, "action", "", "only this action (e.g. task.submit, rule.pause, cluster.remove)")
	cmd.Flags().StringVar(&since, "since", "", "only records at or after this time (RFC 3339, or \"YYYY-MM-DD HH:MM\" in the display zone)")
	return cmd
}
