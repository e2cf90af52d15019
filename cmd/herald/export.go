package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/engine/api"
)

// exportPageSize is how many deliveries `herald deliveries export` asks
// for at a time (the node cuts a page at about 4 MiB too).
const exportPageSize = 1000

// newDeliveriesExportCmd is `herald deliveries export`: every delivery,
// whole, as JSON lines, a page at a time (GET /v1/deliveries/export), so
// neither the node nor the CLI holds more than a page.
func newDeliveriesExportCmd(f *apiFlags) *cobra.Command {
	var since, rule string
	cmd := &cobra.Command{
		Use:   "export [--since T] [--rule R]",
		Short: "Write every delivery as JSON lines, whole, in id order (for archives and audits)",
		Long: `Write every delivery the cluster holds, one JSON object a line, as
"herald deliveries get" shows it (payload and failures whole), in id order,
paging through the node's export endpoint. Every delivery that exists for
the whole export is written exactly once; one added or pruned meanwhile may
or may not be. Deliveries are kept for retention (default 7 days) after
they end.`,
		Example: `  herald deliveries export > deliveries.jsonl
  herald deliveries export --since "2026-11-30 00:00" --rule daily_report | jq -r .state | sort | uniq -c`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := listQuery(cmd, exportPageSize, map[string]string{"rule": rule}, map[string]string{"since": since})
			if err != nil {
				return err
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			n := 0
			for {
				var page api.ExportPage
				if err := f.call(cmd, http.MethodGet, "/v1/deliveries/export?"+q.Encode(), nil, &page); err != nil {
					_ = w.Flush()
					return fmt.Errorf("after %d deliveries: %w", n, err)
				}
				if err := writeLines(w, page.Deliveries); err != nil {
					return err
				}
				n += len(page.Deliveries)
				if page.Next == "" {
					break
				}
				q.Set("after", page.Next)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "exported %d deliveries\n", n)
			return nil
		},
	}
	cmd.Flags().StringVar(&since, "since", "", `only deliveries of runs whose slot is at or after this time (RFC 3339, or "YYYY-MM-DD HH:MM" in --tz)`)
	cmd.Flags().StringVar(&rule, "rule", "", "only this rule's deliveries")
	return cmd
}

// writeLines writes each JSON value on a line of its own.
func writeLines(w *bufio.Writer, items []json.RawMessage) error {
	var line bytes.Buffer
	for _, raw := range items {
		line.Reset()
		if err := json.Compact(&line, raw); err != nil {
			return fmt.Errorf("bad response: %w", err)
		}
		line.WriteByte('\n')
		if _, err := w.Write(line.Bytes()); err != nil {
			return err
		}
	}
	return nil
}
