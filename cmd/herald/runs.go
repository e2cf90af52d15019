package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
)

func init() { register(newRunsCmd) }

func newRunsCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "Decide on runs held for approval (rules with approval = { over = N })",
	}
	f.register(cmd)
	cmd.AddCommand(newRunsDecideCmd(&f, "approve"), newRunsDecideCmd(&f, "reject"))
	return cmd
}

func newRunsDecideCmd(f *apiFlags, verb string) *cobra.Command {
	short := "Approve a run awaiting approval: its messages go out as planned"
	long := `Approve a run held for approval (its rule has approval = { over = N } and it
was planned for more than N people). Its messages then go out as planned;
those whose deadline passed while it waited have expired. A run fired by hand
must be approved with another token than the one that fired it.`
	if verb == "reject" {
		short = "Reject a run awaiting approval: its messages are cancelled, none is sent"
		long = `Reject a run held for approval: its messages are cancelled and none is sent.`
	}
	return &cobra.Command{
		Use:     verb + " RUN",
		Short:   short,
		Long:    long,
		Example: "  herald runs " + verb + " daily_report@2026-12-01T01:00:00Z",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				Run      string          `json:"run"`
				State    string          `json:"state"`
				Approval json.RawMessage `json:"approval"`
				Released int             `json:"released"`
				Cancel   int             `json:"cancelled"`
				Expired  int             `json:"expired"`
			}
			if err := f.call(cmd, http.MethodPost, "/v1/runs/"+url.PathEscape(args[0])+"/"+verb, nil, &out); err != nil {
				return err
			}
			if f.asJSON {
				return cliout.EmitJSON(cmd, out)
			}
			w := cmd.OutOrStdout()
			if verb == "approve" {
				fmt.Fprintf(w, "run %s approved: %d message(s) released", out.Run, out.Released)
			} else {
				fmt.Fprintf(w, "run %s rejected: %d message(s) cancelled", out.Run, out.Cancel)
			}
			if out.Expired > 0 {
				fmt.Fprintf(w, " (%d expired while it waited)", out.Expired)
			}
			fmt.Fprintln(w)
			return nil
		},
	}
}
