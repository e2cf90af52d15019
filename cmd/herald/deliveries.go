package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
)

func init() { register(newDeliveriesCmd) }

// deliveryRow is what the CLI shows of a delivery (GET /v1/deliveries).
type deliveryRow struct {
	ID        string    `json:"id"`
	Rule      string    `json:"rule"`
	RunKey    string    `json:"run_key"`
	Recipient string    `json:"recipient"`
	Channel   string    `json:"channel"`
	State     string    `json:"state"`
	Priority  string    `json:"priority"`
	Attempts  int       `json:"attempts"`
	NotBefore time.Time `json:"not_before"`
	SentAt    time.Time `json:"sent_at"`
	LastError string    `json:"last_error"`
}

func newDeliveriesCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "deliveries",
		Short: "Look at deliveries in the replicated state",
	}
	f.register(cmd)

	var rule, state, run, recipient, date string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List deliveries, newest last",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			day, today := date, ""
			if recipient != "" && day == "" {
				// Today where the operator is (--tz), not where the node is.
				day = time.Now().In(zoneOf(cmd)).Format(time.DateOnly)
				today = " (today in " + zoneOf(cmd).String() + ")"
			}
			params := map[string]string{"rule": rule, "state": state, "run": run, "recipient": recipient, "date": day}
			if z := zoneOf(cmd).String(); day != "" && z != "Local" {
				// The day is --tz's: the node counts it in the same zone
				// (engine.PersonDay), not in its display zone.
				params["tz"] = z
			}
			q, err := listQuery(cmd, limit, params, nil)
			if err != nil {
				return err
			}
			var out struct {
				Total      int                 `json:"total"`
				Date       string              `json:"date,omitempty"`
				Recipients []map[string]string `json:"recipients,omitempty"`
				Deliveries []json.RawMessage   `json:"deliveries"`
			}
			if err := f.call(cmd, http.MethodGet, "/v1/deliveries?"+q.Encode(), nil, &out); err != nil {
				return err
			}
			if f.asJSON {
				return cliout.EmitJSON(cmd, out)
			}
			if recipient != "" {
				return printPersonDeliveries(cmd, recipient, out.Date+today, out.Recipients, out.Deliveries, out.Total)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tRULE\tRECIPIENT\tCHANNEL\tSTATE\tATTEMPTS\tNOT BEFORE\tSENT AT\tERROR")
			for _, raw := range out.Deliveries {
				var d deliveryRow
				if err := json.Unmarshal(raw, &d); err != nil {
					return fmt.Errorf("%s: bad response: %w", f.addr, err)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.ID[:min(12, len(d.ID))], d.Rule, d.Recipient, d.Channel,
					d.State, d.Attempts, showTime(cmd, d.NotBefore), showTime(cmd, d.SentAt), d.LastError)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d of %d shown\n", len(out.Deliveries), out.Total)
			return nil
		},
	}
	list.Flags().StringVar(&rule, "rule", "", "only this rule's deliveries")
	list.Flags().StringVar(&state, "state", "", "only pending, claimed, sent, failed, expired, cancelled or recalled")
	list.Flags().StringVar(&run, "run", "", "only this run's deliveries (run key)")
	list.Flags().StringVar(&recipient, "recipient", "", "only this person's deliveries (userid, or name from the people file) of --date")
	list.Flags().StringVar(&date, "date", "", "only deliveries of runs whose slot falls on this date (YYYY-MM-DD in --tz); with --recipient, default today in --tz")
	list.Flags().IntVar(&limit, "limit", 50, "at most this many, the newest")

	get := &cobra.Command{
		Use:   "get ID",
		Short: "Show one delivery as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d json.RawMessage
			if err := f.call(cmd, http.MethodGet, "/v1/deliveries/"+url.PathEscape(args[0]), nil, &d); err != nil {
				return err
			}
			return cliout.EmitJSON(cmd, d)
		},
	}
	cmd.AddCommand(list, get, newDeliveriesRetryCmd(&f), newDeliveriesRecallCmd(&f), newDeliveriesExportCmd(&f))
	return cmd
}
