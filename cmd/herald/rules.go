package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/rules"
)

func init() { register(newRulesCmd) }

// rulesEnv names the rules directory when neither DIR nor --dir is given,
// as HERALD_RULES does for the agent.
const rulesEnv = "HERALD_RULES"

// devRulesDir is where `herald dev` keeps its rules: run from the
// repository root, the examples in the README work as written.
var devRulesDir = filepath.Join(".herald-dev", "rules")

// defaultRulesDir is the last resort: ./rules.
const defaultRulesDir = "rules"

// findRulesDir picks the rules directory: DIR (the argument), then --dir,
// then HERALD_RULES, then .herald-dev/rules when it exists, then ./rules.
func findRulesDir(arg, flag string) string {
	switch {
	case arg != "":
		return arg
	case flag != "":
		return flag
	}
	if env := os.Getenv(rulesEnv); env != "" {
		return env
	}
	if fi, err := os.Stat(devRulesDir); err == nil && fi.IsDir() {
		return devRulesDir
	}
	return defaultRulesDir
}

func newRulesCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Check, list, preview, fire, pause and resume rules",
		Long: `Check, list and preview the Lua rule files of a rules directory: DIR or --dir,
else $HERALD_RULES, else .herald-dev/rules when it exists (herald dev's), else
./rules. Those commands only read the directory: nothing is sent or written.
fire, pause and resume act on a running cluster (--addr).`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", "", "rules directory (default: $HERALD_RULES, else .herald-dev/rules when present, else ./rules)")
	dirArg := func(args []string) string {
		arg := ""
		if len(args) > 0 {
			arg = args[0]
		}
		return findRulesDir(arg, dir)
	}
	cmd.AddCommand(newRulesCheckCmd(dirArg), newRulesListCmd(dirArg), newRulesPreviewCmd(dirArg), newRulesFireCmd(), newRulesPauseCmd(), newRulesResumeCmd())
	return cmd
}

func newRulesCheckCmd(dirArg func([]string) string) *cobra.Command {
	var config, memoryLimit, timeout string
	cmd := &cobra.Command{
		Use:   "check [DIR] [--config node.yaml]",
		Short: "Load every rule file, the people file and calendars; print errors as file:line: message",
		Long: `Load the directory as a node would and print every error as file:line: message.
With --config, a rule whose channel is not one of that node config's channels
is an error too (a node refuses such a rule and keeps its last good version).
A file whose top level grows memory past the rule memory limit (the node's
rule_memory_limit with --config, --rule-memory-limit, default 128MiB) or
runs past the rule time limit (rule_timeout, --rule-timeout, default 2s) is
an error, as on a node.
Exit status 0 when every file is good, 1 otherwise.`,
		Example: "  herald rules check ./rules --config /etc/herald/node.yaml",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := dirArg(args)
			var channels []string
			if config != "" {
				c, err := configForCheck(config)
				if err != nil {
					return err
				}
				channels = c.channelNames()
				if !cmd.Flags().Changed("rule-memory-limit") {
					memoryLimit = c.RuleMemoryLimit
				}
				if !cmd.Flags().Changed("rule-timeout") {
					timeout = c.RuleTimeout
				}
			}
			limit, err := parseRuleMemoryLimit(memoryLimit)
			if err != nil {
				return fmt.Errorf("--rule-memory-limit %q: %w", memoryLimit, err)
			}
			callTimeout, err := parseRuleTimeout(timeout)
			if err != nil {
				return fmt.Errorf("--rule-timeout %q: %w", timeout, err)
			}
			errs := rules.CheckNode(dir, channels, limit, callTimeout)
			out := cmd.OutOrStdout()
			for _, e := range errs {
				fmt.Fprintln(out, e.String())
			}
			if len(errs) > 0 {
				return fmt.Errorf("%d error(s) in %s", len(errs), dir)
			}
			fmt.Fprintf(out, "%s: all files are good\n", dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "a node's YAML config: also check that every rule's channel is one of its channels, under its rule_memory_limit and rule_timeout")
	cmd.Flags().StringVar(&timeout, "rule-timeout", "", "the rule time limit to check under, as the node key rule_timeout (default: the config's, else 2s)")
	cmd.Flags().StringVar(&memoryLimit, "rule-memory-limit", "", "the rule memory limit to check under, as the node key rule_memory_limit (default: the config's, else 128MiB)")
	return cmd
}

func newRulesListCmd(dirArg func([]string) string) *cobra.Command {
	var (
		now    string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list [DIR]",
		Short: "List rules: trigger, zone, calendar, channel and the next five fire times",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := loadRules(cmd, dirArg(args))
			if err != nil {
				return err
			}
			from := time.Now()
			if now != "" {
				if from, err = parseTime(cmd, "--now", now); err != nil {
					return err
				}
			}
			type row struct {
				Name     string      `json:"name"`
				Trigger  string      `json:"trigger"`
				Zone     string      `json:"zone"`
				Calendar string      `json:"calendar,omitempty"`
				Shift    string      `json:"shift,omitempty"`
				Channel  string      `json:"channel"`
				Priority string      `json:"priority"`
				Next     []time.Time `json:"next"`
				File     string      `json:"file"`
			}
			var rows []row
			for _, r := range s.Rules() {
				rw := row{Name: r.Name, Trigger: r.Schedule, Zone: r.Timezone, Calendar: r.Calendar, Shift: r.Shift,
					Channel: r.Channel, Priority: r.Priority.String(), Next: []time.Time{}, File: r.File}
				if rw.Zone == "" {
					rw.Zone = "UTC"
				}
				if sch := s.Schedule(r.Name); sch != nil {
					rw.Next = sch.NextN(from, 5)
				} else {
					rw.Trigger = "api task"
				}
				rows = append(rows, rw)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTRIGGER\tZONE\tCALENDAR\tCHANNEL\tNEXT")
			for _, rw := range rows {
				cal := rw.Calendar
				if cal == "" {
					cal = "-"
				} else if rw.Shift != "" {
					cal += " (" + rw.Shift + ")"
				}
				next := make([]string, 0, len(rw.Next))
				for _, t := range rw.Next {
					next = append(next, showTime(cmd, t))
				}
				if len(next) == 0 {
					next = append(next, "-")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", rw.Name, rw.Trigger, rw.Zone, cal, rw.Channel, strings.Join(next, ", "))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&now, "now", "", "list fire times after this instant (RFC 3339, or YYYY-MM-DD HH:MM in --tz) instead of now")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newRulesPreviewCmd(dirArg func([]string) string) *cobra.Command {
	var (
		at        string
		data      string
		tasks     string
		directory string
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "preview NAME",
		Short: "Dry-run a rule: every recipient, the exact message, and when it would go",
		Long: `Dry-run a rule at an instant: every recipient with the exact message and when
it would go after stagger. Nothing is sent or written. When --at is not a slot
of the rule's schedule (a statutory holiday for a cn_workday rule, say), nobody
is listed and the reason is given.

--at is RFC 3339, or "YYYY-MM-DD HH:MM[:SS]" in the display zone (--tz,
HERALD_TZ, else the machine's); without it, the rule's next slot (or now, for a
rule triggered by API tasks). Times are shown in the display zone. A rule with
timezone = "recipient" is previewed at --at's clock in each of its zones
("09:00" is every zone's 09:00 run).
--data is an API task's data, as JSON or @file.
--directory merges a WeCom directory snapshot with the people file, as the
nodes do: a node's HTTP address (the snapshot in force there, the one its
plans use) or @file (GET /v1/directory/snapshot saved to a file).`,
		Example: `  herald rules preview daily_report --dir ./rules --at 2026-12-01T09:00:00+08:00
  herald rules preview follow_up --tz Asia/Shanghai --at "2026-12-01 15:00" --data '{"owner":"wangfang","customer":"华东机电","overdue":true}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := loadRules(cmd, dirArg(nil))
			if err != nil {
				return err
			}
			if directory != "" {
				snap, err := fetchDirectorySnapshot(cmd.Context(), directory, 30*time.Second)
				if err != nil {
					return err
				}
				if err := s.SetDirectory(snap); err != nil {
					return fmt.Errorf("--directory: %w", err)
				}
			}
			name := args[0]
			when, err := previewTime(cmd, s, name, at)
			if err != nil {
				return err
			}
			raw, err := previewData(data)
			if err != nil {
				return err
			}
			var res rules.PreviewResult
			if tasks != "" {
				list, err := previewTasks(tasks)
				if err != nil {
					return err
				}
				res, err = s.PreviewTasks(cmd.Context(), name, when, list)
				if err != nil {
					return err
				}
			} else if res, err = s.Preview(cmd.Context(), name, when, raw); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false)
				return enc.Encode(res)
			}
			printPreview(out, res, zoneOf(cmd))
			return nil
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "instant to preview (RFC 3339, or YYYY-MM-DD HH:MM[:SS] in --tz)")
	cmd.Flags().StringVar(&data, "data", "", "API task data: JSON, or @file")
	cmd.Flags().StringVar(&tasks, "tasks", "", "several API tasks due at --at: a JSON array of their data, or @file; shows the digests a digest rule would send")
	cmd.Flags().StringVar(&directory, "directory", "", "WeCom directory snapshot to merge: a node's HTTP address, or @file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// loadRules loads dir once (no watching) and warns about broken files on
// stderr: the good ones still list and preview.
func loadRules(cmd *cobra.Command, dir string) (*rules.Set, error) {
	s, err := rules.Load(rules.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), PoolSize: 1})
	if err != nil {
		return nil, err
	}
	for _, st := range s.Status() {
		if st.Error != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", rules.CheckError{File: st.File, Line: st.Line, Message: st.Error}.String())
		}
	}
	return s, nil
}

// previewTime reads --at in the display zone; empty means the rule's next
// slot (now for a rule triggered by API tasks).
func previewTime(cmd *cobra.Command, s *rules.Set, name, at string) (time.Time, error) {
	if at != "" {
		return parseTime(cmd, "--at", at)
	}
	now := time.Now()
	if sch := s.Schedule(name); sch != nil {
		if next, ok := sch.Next(now); ok {
			return next, nil
		}
	}
	return now.Truncate(time.Second), nil
}

func previewData(data string) (json.RawMessage, error) {
	if data == "" {
		return nil, nil
	}
	b := []byte(data)
	if strings.HasPrefix(data, "@") {
		var err error
		if b, err = os.ReadFile(strings.TrimPrefix(data, "@")); err != nil {
			return nil, fmt.Errorf("--data: %w", err)
		}
	}
	if !json.Valid(b) {
		return nil, errors.New("--data: not valid JSON")
	}
	return b, nil
}

func printPreview(w io.Writer, res rules.PreviewResult, loc *time.Location) {
	show := func(t time.Time) string { return engine.ShowTime(t, loc) }
	fmt.Fprintf(w, "rule %s (%s): channel %s, priority %s\n", res.Rule, res.File, res.Channel, res.Priority)
	fmt.Fprintf(w, "trigger: %s\n", res.Trigger)
	fmt.Fprintf(w, "at: %s\n", show(res.At))
	if res.DirectoryHash != "" {
		fmt.Fprintf(w, "directory: %s (%d people from WeCom, merged with the people file)\n", res.DirectoryHash, res.DirectoryPeople)
	}
	if res.Digest > 0 {
		fmt.Fprintf(w, "digest: %s windows; several messages to one person in a window go as one\n", res.Digest)
	}
	for _, z := range res.Zones {
		if z.IsSlot {
			fmt.Fprintf(w, "zone %s: %s, run %s, %d recipient(s)\n", z.Zone, z.Slot.Format("2006-01-02 15:04 MST (-07:00)"), z.RunKey, z.Recipients)
		} else {
			fmt.Fprintf(w, "zone %s: %s, no run: %s\n", z.Zone, z.Slot.Format("2006-01-02 15:04 MST (-07:00)"), z.Reason)
		}
	}
	if !res.IsSlot {
		fmt.Fprintf(w, "nobody: %s\n", res.Reason)
		if !res.NextSlot.IsZero() {
			fmt.Fprintf(w, "next slot: %s\n", show(res.NextSlot))
		}
		return
	}
	if res.RunKey != "" {
		fmt.Fprintf(w, "run key: %s; deadline %s\n", res.RunKey, show(res.Deadline))
	}
	if len(res.Deliveries) == 0 {
		fmt.Fprintf(w, "nobody: %s\n", res.Reason)
		return
	}
	fmt.Fprintf(w, "%d recipient(s):\n", len(res.Deliveries))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, d := range res.Deliveries {
		who := d.Recipient
		if d.Name != "" {
			who += " (" + d.Name + ")"
		}
		note := ""
		switch {
		case d.Expires:
			note = "  [held past its deadline: would expire, alerted; " + d.Deferred + "]"
		case d.Deferred != "":
			note = "  [held: " + d.Deferred + "]"
		}
		fmt.Fprintf(tw, "  %s\t%s\t+%s\t%s\t%s%s\n", d.At.Format("2006-01-02 15:04:05 MST -07:00"), d.Zone,
			d.Offset.Round(time.Millisecond), who, d.Payload, note)
	}
	_ = tw.Flush()
	for _, dg := range res.Digests {
		who := dg.Recipient
		if dg.Name != "" {
			who += " (" + dg.Name + ")"
		}
		if dg.Payload == nil {
			fmt.Fprintf(w, "digest to %s: digest.message returned nil; the %d messages go one by one\n", who, len(dg.Members))
			continue
		}
		fmt.Fprintf(w, "digest %s to %s at %s %s: %d messages as one:\n  %s\n", dg.ID, who,
			dg.At.Format("2006-01-02 15:04:05 MST -07:00"), dg.Zone, len(dg.Members), dg.Payload)
	}
}

// previewTasks reads --tasks: a JSON array of task data objects, or @file.
func previewTasks(arg string) ([]json.RawMessage, error) {
	raw, err := previewData(arg)
	if err != nil {
		return nil, fmt.Errorf("--tasks: %w", err)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("--tasks: want a JSON array of task data objects: %w", err)
	}
	return list, nil
}
