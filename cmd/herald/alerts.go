package main

import (
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
	"github.com/heraldhq/herald/engine"
)

func init() { register(newAlertsCmd) }

func newAlertsCmd() *cobra.Command {
	var f apiFlags
	var all bool
	list := func(cmd *cobra.Command, _ []string) error {
		var out struct {
			Alerts []*engine.Alert `json:"alerts"`
		}
		if err := f.call(cmd, http.MethodGet, "/v1/alerts", nil, &out); err != nil {
			return err
		}
		shown := make([]*engine.Alert, 0, len(out.Alerts)) // [] in JSON when none, never null
		for _, a := range out.Alerts {
			if all || !a.Acked {
				shown = append(shown, a)
			}
		}
		if f.asJSON {
			return cliout.EmitJSON(cmd, shown)
		}
		if len(shown) == 0 {
			fmt.Fprintln(cmd.OutOrStdout(), "no open alerts")
			return nil
		}
		w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tLAST\tCOUNT\tACKED\tRULE\tMESSAGE")
		for _, a := range shown {
			fmt.Fprintf(w, "%s\t%s\t%d\t%v\t%s\t%s\n", a.ID, showTime(cmd, a.Last), a.Count, a.Acked, a.Rule, engine.LocalizeText(a.Message, zoneOf(cmd)))
		}
		return w.Flush()
	}
	cmd := &cobra.Command{
		Use:   "alerts",
		Short: "List and acknowledge Herald's alerts (failures, expiries, skipped slots, stuck sends, bad channels)",
		Args:  cobra.NoArgs,
		RunE:  list,
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "include acknowledged alerts")
	listCmd := &cobra.Command{Use: "list", Short: "List open alerts (the default)", Args: cobra.NoArgs, RunE: list}
	listCmd.Flags().BoolVar(&all, "all", false, "include acknowledged alerts")
	ack := &cobra.Command{
		Use:   "ack ID",
		Short: "Acknowledge an alert (it re-opens if the problem changes)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				ID string `json:"id"`
			}
			if err := f.call(cmd, http.MethodPost, "/v1/alerts/"+url.PathEscape(args[0])+"/ack", struct{}{}, &out); err != nil {
				return err
			}
			if out.ID == "" {
				out.ID = args[0]
			}
			fmt.Fprintf(cmd.OutOrStdout(), "alert %s acknowledged\n", out.ID) // the whole id, when a prefix was typed
			return nil
		},
	}
	cmd.AddCommand(listCmd, ack)
	return cmd
}
