package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
	"github.com/heraldhq/herald/engine"
)

// burstResult is what `herald bench burst` measures.
type burstResult struct {
	Kind      string    `json:"kind"`
	Messages  int       `json:"messages"`
	Delivered int       `json:"delivered"` // distinct keys in the outbox
	Resent    int       `json:"resent"`    // lines marked duplicate (same key again: harmless)
	Slot      time.Time `json:"slot"`
	// RunStartedMS and RunPlannedMS are when the run was started and fully
	// planned, from the slot (negative: before it).
	RunStartedMS    float64            `json:"run_started_ms"`
	RunPlannedMS    float64            `json:"run_planned_ms"`
	PlanEvaluateMS  float64            `json:"plan_evaluate_ms"`
	PlanReplicateMS float64            `json:"plan_replicate_ms"`
	SlotToSend      latencies          `json:"slot_to_send"` // first, p50, p99, max (= last)
	SendsPerSecond  float64            `json:"sends_per_second"`
	RaftBytes       float64            `json:"raft_bytes"`
	RaftEntries     float64            `json:"raft_entries"`
	PeakRSSMiB      map[string]float64 `json:"peak_rss_mib"`
}

func newBenchBurstCmd(o *benchOpts) *cobra.Command {
	var n int
	var lead time.Duration
	var profileSeconds int
	var ruleFile string
	cmd := &cobra.Command{
		Use:   "burst",
		Short: "One slot, N recipients, no stagger: slot to first / p50 / p99 / last send",
		Long: `One scheduled slot of a rule that sends to N people at once (no stagger),
like the 9:00 report to every salesperson. The rule is written LEAD before
its slot; the bench waits until all N messages are in the outbox.

By default the local cluster gets a people file of N people in two columns
(userid,name) and the rule returns people.all(). --people FILE plans that
people file instead (CSV, JSON or YAML, as the rules read it; bench people
writes one with every documented column), and --rule FILE takes the
rule's recipients from FILE: the body of recipients(run), Lua returning
the people, e.g.

  return people.where { roles = "sales" }

The bench wraps it in its own rule (its slot, the mock channel, the run's
key as each message) and waits for as many messages as the run planned;
--n is then only the size of the generated file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if n <= 0 {
				return fmt.Errorf("--n must be positive")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			recipients := ""
			if ruleFile != "" {
				b, err := os.ReadFile(ruleFile)
				if err != nil {
					return fmt.Errorf("bench: --rule: %w", err)
				}
				recipients = string(b)
			}
			res, err := runBurst(ctx, o, n, lead, profileSeconds, recipients)
			if err != nil {
				return err
			}
			if o.asJSON {
				return cliout.EmitJSON(cmd, res)
			}
			printTable(cmd, fmt.Sprintf("herald bench burst: %d messages, one slot (%s)", res.Messages, res.Slot.Format(time.RFC3339)), [][2]string{
				{"delivered (distinct keys)", fmt.Sprintf("%d of %d (%d resent as duplicates)", res.Delivered, res.Messages, res.Resent)},
				{"run started (from slot)", fmtMS(res.RunStartedMS)},
				{"run planned (from slot)", fmtMS(res.RunPlannedMS)},
				{"plan: evaluate rule", fmtMS(res.PlanEvaluateMS)},
				{"plan: replicate", fmtMS(res.PlanReplicateMS)},
				{"slot → first send", fmtMS(res.SlotToSend.First)},
				{"slot → p50 send", fmtMS(res.SlotToSend.P50)},
				{"slot → p99 send", fmtMS(res.SlotToSend.P99)},
				{"slot → last send", fmtMS(res.SlotToSend.Max)},
				{"sends/s (first to last)", fmt.Sprintf("%.0f", res.SendsPerSecond)},
				{"bytes through Raft", fmt.Sprintf("%s in %.0f entries", fmtBytes(res.RaftBytes), res.RaftEntries)},
				{"peak RSS per node", fmtRSS(res.PeakRSSMiB)},
			})
			return nil
		},
	}
	cmd.Flags().IntVar(&n, "n", 100000, "recipients of the slot")
	cmd.Flags().DurationVar(&lead, "lead", 30*time.Second, "write the rule this long before its slot")
	cmd.Flags().StringVar(&o.profile, "profile", "", "local cluster: write the CPU profiles (from the rule's writing, --profile-seconds long) and allocation profiles of the leader (cpu.pprof, allocs.pprof) and of a follower (follower-cpu.pprof, follower-allocs.pprof) into this directory")
	cmd.Flags().IntVar(&profileSeconds, "profile-seconds", 60, "length of the CPU profile")
	cmd.Flags().StringVar(&o.people, "people", "", "local cluster: plan this people file (.csv, .json, .yaml) instead of N generated people of two columns")
	cmd.Flags().StringVar(&ruleFile, "rule", "", "the recipients of the rule: a file of Lua, the body of recipients(run) (default: return people.all())")
	return cmd
}

const benchBurstRule = "bench_burst"

func runBurst(ctx context.Context, o *benchOpts, n int, lead time.Duration, profileSeconds int, recipients string) (*burstResult, error) {
	if o.addr != "" && o.people != "" {
		return nil, errors.New("bench: --people needs the local cluster (no --addr): an existing cluster has its own people")
	}
	env, err := o.setup(ctx, n, nil)
	if err != nil {
		return nil, err
	}
	defer env.close()
	switch {
	case recipients != "":
	case env.local == nil:
		recipients = generatedRecipients("bench", n)
	default:
		recipients = "return people.all()"
	}
	slot := time.Now().Add(lead).Truncate(time.Second).Add(time.Second).UTC()
	key := engine.RunKey(benchBurstRule, slot)
	bytes0 := sumMetric(ctx, env.addrs[:1], "herald_raft_applied_bytes_total")
	entries0 := sumMetric(ctx, env.addrs[:1], "herald_raft_applied_entries_total")
	eval0 := sumMetric(ctx, env.addrs, "herald_plan_seconds_sum", `phase="evaluate"`)
	repl0 := sumMetric(ctx, env.addrs, "herald_plan_seconds_sum", `phase="replicate"`)
	var prof *profiler
	if o.profile != "" {
		if env.local == nil {
			return nil, errors.New("bench: --profile needs the local cluster (no --addr)")
		}
		leader, err := env.local.leader(ctx)
		if err != nil {
			return nil, err
		}
		follower := ""
		for _, n := range env.local.live() {
			if n != leader {
				follower = n.pprof
				break
			}
		}
		if prof, err = startProfile(ctx, o.profile, leader.pprof, follower, profileSeconds); err != nil {
			return nil, err
		}
	}
	if err := env.writeRule(benchBurstRule, benchRule(benchBurstRule, cronAt(slot), env.channel, "2h", recipients)); err != nil {
		return nil, err
	}

	tail := &outboxTail{path: env.outbox}
	// An outbox shared with earlier runs (--addr): only what comes after.
	if _, err := tail.poll(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var sends []time.Duration
	var firstAt, lastAt time.Time
	resent := 0
	rss := map[string]uint64{}
	nextRSS := time.Now()
	// How many to wait for: N, unless another people file or rule says
	// otherwise; then what the run planned, once it is planned.
	expected := n
	if o.people != "" || recipients != "return people.all()" && env.local != nil {
		expected = -1
	}
	c := &cluster.Client{Addr: env.addrs[0], HTTP: benchHTTP}
	nextRun := time.Now()
	for expected < 0 || len(seen) < expected {
		// The run is looked at whatever is expected: one the leader
		// stopped (a rule limit) ends the bench with its reason at once,
		// not after --timeout with nothing sent.
		if time.Now().After(nextRun) {
			r, err := benchRun(ctx, c, key)
			if err != nil {
				return nil, err
			}
			switch {
			case r.failed():
				return nil, fmt.Errorf("bench: the run failed: %s", r.Error)
			case expected < 0 && !r.PlannedAt.IsZero():
				expected = r.Planned
			}
			nextRun = time.Now().Add(time.Second)
		}
		recs, err := tail.poll()
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Payload.Content != key {
				continue
			}
			if r.Duplicate || seen[r.Key] {
				resent++
				continue
			}
			seen[r.Key] = true
			sends = append(sends, r.ReceivedAt.Sub(slot))
			if firstAt.IsZero() || r.ReceivedAt.Before(firstAt) {
				firstAt = r.ReceivedAt
			}
			if r.ReceivedAt.After(lastAt) {
				lastAt = r.ReceivedAt
			}
		}
		if time.Now().After(nextRSS) {
			env.sampleRSS(ctx, rss)
			nextRSS = time.Now().Add(time.Second)
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return nil, fmt.Errorf("bench: gave up with %d of %d messages sent: %w", len(seen), expected, ctx.Err())
		}
	}
	res := &burstResult{
		Kind: "burst", Messages: expected, Delivered: len(seen), Resent: resent, Slot: slot,
		SlotToSend:      summarise(sends),
		RaftBytes:       sumMetric(ctx, env.addrs[:1], "herald_raft_applied_bytes_total") - bytes0,
		RaftEntries:     sumMetric(ctx, env.addrs[:1], "herald_raft_applied_entries_total") - entries0,
		PlanEvaluateMS:  (sumMetric(ctx, env.addrs, "herald_plan_seconds_sum", `phase="evaluate"`) - eval0) * 1000,
		PlanReplicateMS: (sumMetric(ctx, env.addrs, "herald_plan_seconds_sum", `phase="replicate"`) - repl0) * 1000,
		PeakRSSMiB:      env.peakRSS(ctx, rss),
	}
	if span := lastAt.Sub(firstAt); span > 0 {
		res.SendsPerSecond = float64(len(seen)-1) / span.Seconds()
	}
	r, err := benchRun(ctx, c, key)
	if err != nil {
		return nil, err
	}
	if !r.StartedAt.IsZero() {
		res.RunStartedMS = ms(r.StartedAt.Sub(slot))
		res.RunPlannedMS = ms(r.PlannedAt.Sub(slot))
	}
	if prof != nil {
		if err := prof.finish(ctx); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// runView is what the burst reads of a run in /v1/runs.
type runView struct {
	Key       string          `json:"key"`
	State     json.RawMessage `json:"state"` // a name or a number, whichever the API writes
	Error     string          `json:"error"`
	StartedAt time.Time       `json:"started_at"`
	PlannedAt time.Time       `json:"planned_at"`
	Planned   int             `json:"planned"`
}

func (r runView) failed() bool {
	s := strings.Trim(string(r.State), `"`)
	return s == engine.RunFailed.String() || s == strconv.Itoa(int(engine.RunFailed))
}

// benchRun is the bench rule's run of key as /v1/runs lists it (zero
// before it started).
func benchRun(ctx context.Context, c *cluster.Client, key string) (runView, error) {
	var runs struct {
		Runs []runView `json:"runs"`
	}
	if err := c.Do(ctx, http.MethodGet, "/v1/runs?rule="+benchBurstRule+"&limit=100", nil, &runs); err != nil {
		return runView{}, fmt.Errorf("bench: runs: %w", err)
	}
	for _, r := range runs.Runs {
		if r.Key == key {
			return r, nil
		}
	}
	return runView{}, nil
}
