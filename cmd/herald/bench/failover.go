package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
)

// failoverResult is what `herald bench failover` measures.
type failoverResult struct {
	Kinds      string    `json:"kind"`
	Kills      int       `json:"kills"`
	Rate       int       `json:"rate"`
	FailoverMS []float64 `json:"failover_ms"` // per kill: SIGKILL of the leader → next send
	Failover   latencies `json:"failover"`
	// NoSend counts kills after which nothing was sent within a minute.
	NoSend     int                `json:"no_send"`
	Resent     int                `json:"resent"` // outbox lines marked duplicate: resends after a kill
	PeakRSSMiB map[string]float64 `json:"peak_rss_mib"`
}

func newBenchFailoverCmd(o *benchOpts) *cobra.Command {
	var kills, rate int
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "SIGKILL the leader again and again: time from the kill to the next send",
		Long: `Keeps the mock channel busy (a rule every second with twice as many
recipients as the channel's limit lets through, so a backlog is always
waiting), then, KILLS times: SIGKILLs the leader (with its plugins),
measures the time to the next message the channel receives, restarts the
node with its data and waits for the cluster to be whole again. Needs the
local cluster (it kills its processes): no --addr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.addr != "" {
				return errors.New("bench failover kills and restarts nodes: it runs on its own local cluster, not with --addr")
			}
			if kills <= 0 || rate <= 0 {
				return errors.New("--kills and --rate must be positive")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			res, err := runFailover(ctx, o, kills, rate)
			if err != nil {
				return err
			}
			if o.asJSON {
				return cliout.EmitJSON(cmd, res)
			}
			each := make([]string, len(res.FailoverMS))
			for i, v := range res.FailoverMS {
				each[i] = fmt.Sprintf("%.2f", v/1000)
			}
			printTable(cmd, fmt.Sprintf("herald bench failover: %d leader kills, channel limited to %d/s", kills, rate), [][2]string{
				{"kill → next send p50", fmtMS(res.Failover.P50)},
				{"kill → next send p99", fmtMS(res.Failover.P99)},
				{"kill → next send max", fmtMS(res.Failover.Max)},
				{"each (s)", strings.Join(each, " ")},
				{"no send within a minute", fmt.Sprint(res.NoSend)},
				{"resent as duplicates", fmt.Sprint(res.Resent)},
				{"peak RSS per node", fmtRSS(res.PeakRSSMiB)},
			})
			return nil
		},
	}
	cmd.Flags().IntVar(&kills, "kills", 20, "how many times to kill the leader")
	cmd.Flags().IntVar(&rate, "rate", 50, "the mock channel's limit, messages per second (the rule sends twice that)")
	return cmd
}

const benchSteadyRule = "bench_steady"

func runFailover(ctx context.Context, o *benchOpts, kills, rate int) (*failoverResult, error) {
	limits := map[string]any{"limits": []map[string]any{{"scope": "channel", "count": rate, "per": "1s"}}}
	env, err := o.setup(ctx, 0, limits)
	if err != nil {
		return nil, err
	}
	defer env.close()
	if err := env.writeRule(benchSteadyRule, benchRule(benchSteadyRule, "* * * * * *", env.channel, "1h", generatedRecipients("steady", 2*rate))); err != nil {
		return nil, err
	}
	c := env.local
	tail := &outboxTail{path: env.outbox}
	res := &failoverResult{Kinds: "failover", Kills: kills, Rate: rate}
	rss := map[string]uint64{}
	// sendAfter waits for the first message received after t.
	sendAfter := func(t time.Time, limit time.Duration) (time.Time, bool, error) {
		deadline := time.Now().Add(limit)
		for {
			recs, err := tail.poll()
			if err != nil {
				return time.Time{}, false, err
			}
			var at time.Time
			for _, r := range recs {
				if r.Duplicate {
					res.Resent++
				}
				if r.ReceivedAt.After(t) && (at.IsZero() || r.ReceivedAt.Before(at)) {
					at = r.ReceivedAt
				}
			}
			if !at.IsZero() {
				return at, true, nil
			}
			if time.Now().After(deadline) {
				return time.Time{}, false, nil
			}
			if !sleepCtx(ctx, 5*time.Millisecond) {
				return time.Time{}, false, ctx.Err()
			}
		}
	}
	if _, ok, err := sendAfter(time.Now(), time.Minute); err != nil || !ok {
		return nil, fmt.Errorf("bench: nothing was sent within a minute of writing the rule (logs in %s): %v", env.dir, err)
	}
	var ds []time.Duration
	for range kills {
		// Whole again, and sending: then kill.
		if err := c.waitReady(ctx, 3, 2*time.Minute); err != nil {
			return nil, err
		}
		if _, ok, err := sendAfter(time.Now(), time.Minute); err != nil || !ok {
			return nil, fmt.Errorf("bench: the cluster is whole but sends nothing (logs in %s): %v", env.dir, err)
		}
		leader, err := c.leader(ctx)
		if err != nil {
			return nil, err
		}
		env.sampleRSS(ctx, rss)
		killed := time.Now()
		c.kill(leader)
		at, ok, err := sendAfter(killed, time.Minute)
		if err != nil {
			return nil, err
		}
		if ok {
			d := at.Sub(killed)
			ds = append(ds, d)
			res.FailoverMS = append(res.FailoverMS, ms(d))
		} else {
			res.NoSend++
		}
		if err := c.startNode(leader); err != nil {
			return nil, err
		}
	}
	res.Failover = summarise(ds)
	res.PeakRSSMiB = env.peakRSS(ctx, rss)
	return res, nil
}
