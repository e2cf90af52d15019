package main

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
	"github.com/heraldhq/herald/engine/api"
)

func newDeliveriesRecallCmd(f *apiFlags) *cobra.Command {
	var run, rule, since, wait string
	cmd := &cobra.Command{
		Use:   "recall ID... | --run KEY | --rule R --since T",
		Short: "Take sent messages back from the recipients' chats (WeCom app messages within 24 h)",
		Long: `Recall sent messages: the leader asks each one's channel to take it back
(WeCom's message/recall) and the delivery moves to the state recalled. Group
robot (webhook) messages, messages sent more than 24 h ago and messages not
sent are reported one by one as not recallable, and nothing about them
changes. The command waits up to --wait for the channels' answers; what is
still pending then goes on in the background (see herald deliveries get ID).
IDs may be unique prefixes of 8 or more characters.`,
		Example: `  herald deliveries recall 6820f695ccfc
  herald deliveries recall --run daily_report@2026-11-30T01:00:00Z
  herald deliveries recall --rule daily_report --since "2026-11-30 09:00"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.RecallRequest{IDs: args, Run: run, Rule: rule, Wait: wait, By: whoAmI()}
			var err error
			if req.Since, err = wireTime(cmd, "--since", since); err != nil {
				return err
			}
			if !api.OneSelector(args, run, rule) {
				return errors.New("give delivery ids, or --run KEY, or --rule R --since T")
			}
			if rule != "" && since == "" {
				return errors.New("--rule needs --since: recall what the rule sent since when?")
			}
			var out api.RecallResponse
			if err := f.call(cmd, http.MethodPost, "/v1/deliveries/recall", req, &out); err != nil {
				return err
			}
			if f.asJSON {
				return cliout.EmitJSON(cmd, out)
			}
			w := cmd.OutOrStdout()
			short := func(id string) string { return id[:min(12, len(id))] }
			for _, it := range out.Recalled {
				fmt.Fprintf(w, "recalled %s (%s, %s)\n", short(it.ID), it.Recipient, it.Channel)
			}
			for _, it := range out.NotRecallable {
				fmt.Fprintf(w, "not recallable %s (%s, %s): %s\n", short(it.ID), it.Recipient, it.Channel, it.Reason)
			}
			for _, it := range out.Pending {
				fmt.Fprintf(w, "pending %s (%s, %s): the channel has not answered yet\n", short(it.ID), it.Recipient, it.Channel)
			}
			fmt.Fprintf(w, "%d recalled, %d not recallable, %d pending\n", len(out.Recalled), len(out.NotRecallable), len(out.Pending))
			if len(out.Recalled) == 0 && len(out.Pending) == 0 && len(out.NotRecallable) > 0 {
				return errors.New("nothing was recalled")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "recall this run's messages")
	cmd.Flags().StringVar(&rule, "rule", "", "recall this rule's messages sent since --since")
	cmd.Flags().StringVar(&since, "since", "", `with --rule: those sent at or after this time (RFC 3339, or "YYYY-MM-DD HH:MM" in --tz)`)
	cmd.Flags().StringVar(&wait, "wait", "15s", "wait this long for the channels' answers (at most 1m)")
	return cmd
}
