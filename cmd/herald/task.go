package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
	"github.com/heraldhq/herald/engine/api"
)

func init() { register(newTaskCmd) }

func newTaskCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "task",
		Short: "Submit, inspect and cancel API tasks (a rule fired once at a time)",
		Long: `An API task fires a rule once at its due time with its data, unless it is
cancelled first (an enquiry reminder cancelled when someone answers). Tasks are
idempotent by key: submitting the same key and body again changes nothing; the
same key with another body is refused with the difference.`,
	}
	f.register(cmd)
	cmd.AddCommand(newTaskSubmitCmd(&f), newTaskGetCmd(&f), newTaskCancelCmd(&f), newTaskListCmd(&f))
	return cmd
}

func newTaskSubmitCmd(f *apiFlags) *cobra.Command {
	var rule, due, data string
	var in time.Duration
	var replace bool
	cmd := &cobra.Command{
		Use:   "submit KEY --rule RULE (--due TIME | --in DURATION) [--data JSON|@FILE] [--replace]",
		Short: "Submit a task",
		Example: `  herald task submit enquiry-8812 --rule enquiry_timeout --in 15m \
      --data '{"enquiry":"8812","assignee":"liuyang","level":1}'
  herald task submit follow-8812 --rule follow_up --due 2026-12-01T15:00:00+08:00 --data @follow.json
  herald task submit enquiry-8812 --rule enquiry_timeout --in 15m --replace   # the customer wrote again: restart the 15 minutes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			withIn := cmd.Flags().Changed("in") // --in 0s is "now", given
			if (due == "") == !withIn {
				return errors.New("give exactly one of --due TIME and --in DURATION")
			}
			var err error
			if withIn {
				due = time.Now().Add(in).Format(time.RFC3339Nano)
			} else if due, err = wireTime(cmd, "--due", due); err != nil {
				return err
			}
			if rule == "" && !replace {
				return errors.New("--rule is required: the rule the task fires")
			}
			req := api.TaskRequest{Key: args[0], Rule: rule, DueAt: due}
			if data != "" {
				raw := []byte(data)
				if name, ok := strings.CutPrefix(data, "@"); ok {
					var err error
					if raw, err = os.ReadFile(name); err != nil {
						return fmt.Errorf("--data: %w", err)
					}
				}
				if !json.Valid(raw) {
					return errors.New("--data: not valid JSON")
				}
				req.Data = raw
			}
			var out api.TaskView
			if replace {
				// PUT /v1/tasks/KEY moves the pending task; a key not
				// submitted yet is submitted (with --rule), as without
				// --replace.
				err := f.call(cmd, http.MethodPut, "/v1/tasks/"+url.PathEscape(args[0]), api.TaskReplaceRequest{DueAt: req.DueAt, Data: req.Data}, &out)
				var ae *cluster.APIError
				if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || rule == "" {
					if err != nil {
						return err
					}
					return printSubmitted(cmd, f, out)
				}
			}
			if err := f.call(cmd, http.MethodPost, "/v1/tasks", req, &out); err != nil {
				return err
			}
			if f.asJSON {
				return cliout.EmitJSON(cmd, out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "task %s: rule %s due %s (%s)\n", out.Key, out.Rule, showTime(cmd, out.DueAt), out.State)
			return nil
		},
	}
	cmd.Flags().StringVar(&rule, "rule", "", "rule to fire (required)")
	cmd.Flags().StringVar(&due, "due", "", `due time: RFC 3339, or "YYYY-MM-DD HH:MM[:SS]" in the display zone (--tz)`)
	cmd.Flags().DurationVar(&in, "in", 0, "due this long from now")
	cmd.Flags().StringVar(&data, "data", "", "the task's data: a JSON object, or @FILE")
	cmd.Flags().BoolVar(&replace, "replace", false, "move the pending task KEY to the new due time (and data, if given) instead of refusing a second submit; 409 once it fired or was cancelled")
	return cmd
}

func printSubmitted(cmd *cobra.Command, f *apiFlags, out api.TaskView) error {
	if f.asJSON {
		return cliout.EmitJSON(cmd, out)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "task %s: rule %s due %s (%s)\n", out.Key, out.Rule, showTime(cmd, out.DueAt), out.State)
	return nil
}

func newTaskGetCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get KEY",
		Short: "Show a task and what became of it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out api.TaskView
			if err := f.call(cmd, http.MethodGet, "/v1/tasks/"+url.PathEscape(args[0]), nil, &out); err != nil {
				return err
			}
			if f.asJSON {
				return cliout.EmitJSON(cmd, out)
			}
			printTask(cmd, out)
			return nil
		},
	}
}

func newTaskCancelCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel KEY",
		Short: "Cancel a task before it is sent (after it was, you are told what happened)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out api.TaskView
			if err := f.call(cmd, http.MethodDelete, "/v1/tasks/"+url.PathEscape(args[0]), nil, &out); err != nil {
				return err
			}
			if f.asJSON {
				return cliout.EmitJSON(cmd, out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "task %s cancelled\n", out.Key)
			return nil
		},
	}
}

func newTaskListCmd(f *apiFlags) *cobra.Command {
	var rule, state, from, to string
	var limit int
	var all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tasks by due time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := listQuery(cmd, limit, map[string]string{"rule": rule, "state": state}, map[string]string{"from": from, "to": to})
			if err != nil {
				return err
			}
			tasks := []api.TaskView{} // [] in JSON when none, never null
			for {
				var page api.TaskList
				if err := f.call(cmd, http.MethodGet, "/v1/tasks?"+q.Encode(), nil, &page); err != nil {
					return err
				}
				tasks = append(tasks, page.Tasks...)
				if !all || page.Next == "" {
					break
				}
				q.Set("cursor", page.Next)
			}
			if f.asJSON {
				return cliout.EmitJSON(cmd, tasks)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "KEY\tRULE\tDUE\tSTATE\tDELIVERIES")
			for _, t := range tasks {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.Key, t.Rule, showTime(cmd, t.DueAt), t.State, countsText(t.Deliveries))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&rule, "rule", "", "only this rule's tasks")
	cmd.Flags().StringVar(&state, "state", "", "pending, fired or cancelled")
	cmd.Flags().StringVar(&from, "from", "", "due at or after this time (RFC 3339, or YYYY-MM-DD HH:MM in --tz)")
	cmd.Flags().StringVar(&to, "to", "", "due before this time (RFC 3339, or YYYY-MM-DD HH:MM in --tz)")
	cmd.Flags().IntVar(&limit, "limit", 100, "tasks per page (at most 1000)")
	cmd.Flags().BoolVar(&all, "all", false, "follow every page")
	return cmd
}

func printTask(cmd *cobra.Command, t api.TaskView) {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "key\t%s\nrule\t%s\ndue\t%s\nstate\t%s\nsubmitted\t%s\n", t.Key, t.Rule, showTime(cmd, t.DueAt), t.State, showTime(cmd, t.SubmittedAt))
	if !t.FiredAt.IsZero() {
		fmt.Fprintf(w, "fired\t%s\n", showTime(cmd, t.FiredAt))
	}
	if !t.CancelledAt.IsZero() {
		fmt.Fprintf(w, "cancelled\t%s\n", showTime(cmd, t.CancelledAt))
	}
	if t.Run != "" {
		late := ""
		if t.Late {
			late = ", late"
		}
		fmt.Fprintf(w, "run\t%s (%s%s)\ndeliveries\t%s\n", t.Run, t.RunState, late, countsText(t.Deliveries))
	}
	if len(t.Data) > 0 {
		// The API indents its answers, data included: one line here.
		var data bytes.Buffer
		if json.Compact(&data, t.Data) != nil {
			data.Write(t.Data)
		}
		fmt.Fprintf(w, "data\t%s\n", data.Bytes())
	}
	_ = w.Flush()
}

// countsText shows {"sent":2,"pending":1} as "1 pending, 2 sent".
func countsText(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}
