// Package bench is `herald bench`: it measures a Herald cluster end to end
// (a burst, slot precision, failover), either a local three-node cluster of
// this very binary's `herald agent` processes or an existing one given by
// --addr. It lives apart from package main so that main stays parse, wire,
// call; main registers Command and nothing else of it.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// benchOpts are the flags every `herald bench` command shares.
type benchOpts struct {
	addr     string // an existing cluster (any member's HTTP address); "" starts a local one
	rules    string // with addr: the rules directory that cluster watches
	outbox   string // with addr: the mock channel's outbox file
	channel  string // the channel the bench rules send through
	asJSON   bool
	keep     bool
	logLevel string
	timeout  time.Duration
	profile  string // burst, tasks: write the leader's and a follower's CPU and allocation profiles here
	people   string // burst: this people file instead of the generated one
}

// Command builds a fresh `herald bench` command tree (burst, precision,
// failover and their flags), as every herald command constructor does, so
// tests can run it in-process as often as they like.
func Command() *cobra.Command {
	var o benchOpts
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the cluster end to end: a burst, slot precision, failover, pending tasks",
		Long: `Measure Herald end to end on this machine. Each command starts a local
three-node cluster of this binary (herald agent processes in a temporary
directory, free loopback ports, the mock channel), writes its rule, measures
from the mock's outbox, prints a table (or --json) and stops the cluster.

With --addr it measures an existing cluster instead: give the rules
directory its nodes watch (--rules) and the outbox of its mock channel
(--outbox); the bench writes its rule file there and removes it after.

Benchmarks on a shared machine are noisy: compare figures of one run (or
runs back to back), not across days.`,
	}
	cmd.PersistentFlags().StringVar(&o.addr, "addr", "", "measure the cluster at this HTTP address instead of starting one (needs --rules and --outbox)")
	cmd.PersistentFlags().StringVar(&o.rules, "rules", "", "with --addr: the rules directory the cluster watches")
	cmd.PersistentFlags().StringVar(&o.outbox, "outbox", "", "with --addr: the mock channel's outbox file")
	cmd.PersistentFlags().StringVar(&o.channel, "channel", "mock", "with --addr: the channel the bench rule sends through (a mock channel writing --outbox)")
	cmd.PersistentFlags().BoolVar(&o.asJSON, "json", false, "print the result as JSON")
	cmd.PersistentFlags().BoolVar(&o.keep, "keep", false, "keep the local cluster's directory (data, logs, outbox) and print where it is")
	cmd.PersistentFlags().StringVar(&o.logLevel, "log-level", "warn", "the local nodes' log level (their logs are in the cluster's directory)")
	cmd.PersistentFlags().DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	cmd.AddCommand(newBenchBurstCmd(&o), newBenchPrecisionCmd(&o), newBenchFailoverCmd(&o), newBenchTasksCmd(&o), newBenchPeopleCmd())
	return cmd
}

// benchEnv is the cluster under test, local or given by --addr.
type benchEnv struct {
	addrs   []string // members' HTTP addresses
	rules   string
	outbox  string
	channel string
	local   *benchCluster // nil with --addr
	written []string      // rule files the bench wrote, removed at close
	dir     string
	keep    bool
}

// setup starts a local cluster (people people in its directory, the mock
// channel with mockExtra keys) or connects to the one at --addr.
func (o *benchOpts) setup(ctx context.Context, people int, mockExtra map[string]any) (*benchEnv, error) {
	if o.addr != "" {
		if o.rules == "" || o.outbox == "" {
			return nil, errors.New("bench: --addr needs --rules (the directory the cluster watches) and --outbox (its mock channel's outbox)")
		}
		st, err := benchStatus(ctx, o.addr)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", o.addr, err)
		}
		env := &benchEnv{rules: o.rules, outbox: o.outbox, channel: o.channel}
		for _, m := range st.Members {
			env.addrs = append(env.addrs, strings.TrimPrefix(m.HTTPAddr, "http://"))
		}
		return env, nil
	}
	dir, err := os.MkdirTemp("", "herald-bench-")
	if err != nil {
		return nil, err
	}
	env := &benchEnv{channel: "mock", dir: dir, keep: o.keep}
	c, err := newBenchCluster(dir, o.logLevel, mockExtra, o.profile != "")
	if err != nil {
		env.close()
		return nil, err
	}
	env.local, env.rules, env.outbox = c, c.rules, c.outbox
	if err := o.writePeopleTo(c.rules, people); err != nil {
		env.close()
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		env.close()
		return nil, err
	}
	for _, n := range c.nodes {
		env.addrs = append(env.addrs, n.http)
	}
	return env, nil
}

// writePeopleTo puts the cluster's people file into its rules directory:
// a copy of --people, else that many generated people of two columns (none
// for 0).
func (o *benchOpts) writePeopleTo(rulesDir string, people int) error {
	if o.people == "" {
		if people == 0 {
			return nil
		}
		return writePeople(filepath.Join(rulesDir, "people.csv"), people, 2)
	}
	name, err := peopleFileName(o.people)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(o.people)
	if err != nil {
		return fmt.Errorf("bench: --people: %w", err)
	}
	return os.WriteFile(filepath.Join(rulesDir, name), data, 0o644)
}

// writeRule writes a bench rule file into the rules directory.
func (e *benchEnv) writeRule(name, src string) error {
	path := filepath.Join(e.rules, name+".lua")
	if err := writeFileAtomic(path, []byte(src)); err != nil {
		return err
	}
	e.written = append(e.written, path)
	return nil
}

// sampleRSS records the nodes' resident sets: VmHWM of the local
// processes; with --addr, process_resident_memory_bytes now (a sample, so
// a short peak can be missed).
func (e *benchEnv) sampleRSS(ctx context.Context, peak map[string]uint64) {
	if e.local != nil {
		for _, n := range e.local.live() {
			n.sampleRSS()
		}
		return
	}
	for _, a := range e.addrs {
		if v, err := scrapeMetric(ctx, a, "process_resident_memory_bytes"); err == nil && uint64(v) > peak[a] {
			peak[a] = uint64(v)
		}
	}
}

// peakRSS returns each node's peak resident set in MiB.
func (e *benchEnv) peakRSS(ctx context.Context, sampled map[string]uint64) map[string]float64 {
	e.sampleRSS(ctx, sampled)
	out := map[string]float64{}
	if e.local != nil {
		for _, n := range e.local.nodes {
			out[n.id] = float64(n.peakRSS) / (1 << 20)
		}
		return out
	}
	for a, v := range sampled {
		out[a] = float64(v) / (1 << 20)
	}
	return out
}

// close removes the bench's rule files and stops a local cluster.
func (e *benchEnv) close() {
	for _, p := range e.written {
		_ = os.Remove(p)
	}
	if e.local != nil {
		e.local.stop()
	}
	if e.dir == "" {
		return
	}
	if e.keep {
		fmt.Fprintln(os.Stderr, "bench: the cluster's directory is kept:", e.dir)
		return
	}
	_ = os.RemoveAll(e.dir)
}

// benchRule is the Lua of a bench rule: each recipient gets the run's key
// as a text message, which is how the outbox tells runs apart. A rule
// with no schedule fires only by API tasks.
func benchRule(name, schedule, channel, deadline, recipients string) string {
	trigger := ""
	if schedule != "" {
		trigger = fmt.Sprintf(" schedule = %q, timezone = \"UTC\",", schedule)
	}
	return fmt.Sprintf(`return rule {
  name = %q,%s channel = %q, deadline = %q,
  recipients = function(run) %s end,
  message = function(run, to) return { msgtype = "text", content = run.key } end,
}
`, name, trigger, channel, deadline, recipients)
}

// generatedRecipients is Lua that returns n userids prefix000001…, for rules
// that must not depend on a cluster's people file.
func generatedRecipients(prefix string, n int) string {
	return fmt.Sprintf(`local t = {} for i = 1, %d do t[i] = string.format("%s%%06d", i) end return t`, n, prefix)
}

// cronAt is a six-field cron spec (with seconds) matching t (UTC) once a
// year.
func cronAt(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("%d %d %d %d %d *", t.Second(), t.Minute(), t.Hour(), t.Day(), int(t.Month()))
}

// printTable prints figure/value rows aligned.
func printTable(cmd *cobra.Command, title string, rows [][2]string) {
	w := cmd.OutOrStdout()
	width := 0
	for _, r := range rows {
		width = max(width, len(r[0]))
	}
	fmt.Fprintln(w, title)
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s  %s\n", width, r[0], r[1])
	}
}

func fmtMS(v float64) string {
	if v >= 10000 || v <= -10000 {
		return fmt.Sprintf("%.2f s", v/1000)
	}
	return fmt.Sprintf("%.1f ms", v)
}

func fmtRSS(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.0f MiB", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func fmtBytes(b float64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}
