package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
)

// precisionResult is what `herald bench precision` measures.
type precisionResult struct {
	Kind       string  `json:"kind"`
	ForSeconds float64 `json:"for_s"`
	Every      string  `json:"every"`
	Recipients int     `json:"recipients"`
	Slots      int     `json:"slots"`  // slots of the window
	Missed     int     `json:"missed"` // slots of the window with no send
	// SlotToFirst and SlotToLast are over the slots: for each, its first and
	// its last send.
	SlotToFirst latencies `json:"slot_to_first"`
	SlotToLast  latencies `json:"slot_to_last"`
	// Burst, when --burst was given: an API task of that many recipients on
	// the same channel, due when the window opens.
	Burst          int                `json:"burst,omitempty"`
	BurstDelivered int                `json:"burst_delivered,omitempty"`
	BurstToLastMS  float64            `json:"burst_to_last_ms,omitempty"`
	PeakRSSMiB     map[string]float64 `json:"peak_rss_mib"`
}

func newBenchPrecisionCmd(o *benchOpts) *cobra.Command {
	var dur, every time.Duration
	var recipients, burst int
	cmd := &cobra.Command{
		Use:   "precision",
		Short: "A small rule every 2 s: how close to its slot each run's first message leaves",
		Long: `A small scheduled rule (RECIPIENTS people, every EVERY) runs for the given
time; for each slot the bench takes its first and last send. With --burst N
an API task of N recipients on the same channel is due when the window
opens: the small rule's lateness then shows whether one huge run holds up
another rule's slots.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if every < time.Second || every%time.Second != 0 || (time.Minute%every) != 0 {
				return fmt.Errorf("--every %s: want whole seconds dividing a minute (1s, 2s, 5s, …)", every)
			}
			if dur < every || recipients <= 0 || burst < 0 {
				return fmt.Errorf("--for must be at least --every, --recipients positive, --burst not negative")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			res, err := runPrecision(ctx, o, dur, every, recipients, burst)
			if err != nil {
				return err
			}
			if o.asJSON {
				return cliout.EmitJSON(cmd, res)
			}
			rows := [][2]string{
				{"slots (missed)", fmt.Sprintf("%d (%d)", res.Slots, res.Missed)},
				{"slot → first send p50", fmtMS(res.SlotToFirst.P50)},
				{"slot → first send p99", fmtMS(res.SlotToFirst.P99)},
				{"slot → first send max", fmtMS(res.SlotToFirst.Max)},
				{"slot → last send p99", fmtMS(res.SlotToLast.P99)},
				{"slot → last send max", fmtMS(res.SlotToLast.Max)},
			}
			if res.Burst > 0 {
				rows = append(rows, [2]string{"burst task: due → last send", fmt.Sprintf("%s (%d of %d delivered)", fmtMS(res.BurstToLastMS), res.BurstDelivered, res.Burst)})
			}
			rows = append(rows, [2]string{"peak RSS per node", fmtRSS(res.PeakRSSMiB)})
			printTable(cmd, fmt.Sprintf("herald bench precision: %d recipients every %s for %s", recipients, every, dur), rows)
			return nil
		},
	}
	cmd.Flags().DurationVar(&dur, "for", time.Minute, "how long to measure")
	cmd.Flags().DurationVar(&every, "every", 2*time.Second, "the small rule's period")
	cmd.Flags().IntVar(&recipients, "recipients", 5, "the small rule's recipients")
	cmd.Flags().IntVar(&burst, "burst", 0, "also an API task of this many recipients on the same channel, due when the window opens")
	return cmd
}

const (
	benchTickRule  = "bench_tick"
	benchBlastRule = "bench_blast"
)

func runPrecision(ctx context.Context, o *benchOpts, dur, every time.Duration, recipients, burst int) (*precisionResult, error) {
	env, err := o.setup(ctx, 0, nil)
	if err != nil {
		return nil, err
	}
	defer env.close()
	if err := env.writeRule(benchTickRule, benchRule(benchTickRule, fmt.Sprintf("*/%d * * * * *", int(every/time.Second)), env.channel, "1h",
		generatedRecipients("tick", recipients))); err != nil {
		return nil, err
	}
	blastKey := ""
	if burst > 0 {
		if err := env.writeRule(benchBlastRule, benchRule(benchBlastRule, "", env.channel, "2h", generatedRecipients("blast", burst))); err != nil {
			return nil, err
		}
	}
	tail := &outboxTail{path: env.outbox}
	if _, err := tail.poll(); err != nil {
		return nil, err
	}
	// The window opens at the first slot the nodes have surely loaded the
	// rule for: after the first tick is seen.
	var start time.Time
	rss := map[string]uint64{}
	// By the slot's Unix second: time.Time keys would compare zones too.
	first := map[int64]time.Time{}
	last := map[int64]time.Time{}
	var blastDue, blastLast time.Time
	blastSeen := map[string]bool{}
	var end time.Time
	for {
		recs, err := tail.poll()
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if blastKey != "" && r.Payload.Content == "task:"+blastKey {
				if !r.Duplicate && !blastSeen[r.Key] {
					blastSeen[r.Key] = true
					blastLast = r.ReceivedAt
				}
				continue
			}
			slot, ok := runSlot(r.Payload.Content)
			if !ok || !strings.HasPrefix(r.Payload.Content, benchTickRule+"@") {
				continue
			}
			if f, ok := first[slot.Unix()]; !ok || r.ReceivedAt.Before(f) {
				first[slot.Unix()] = r.ReceivedAt
			}
			if r.ReceivedAt.After(last[slot.Unix()]) {
				last[slot.Unix()] = r.ReceivedAt
			}
		}
		now := time.Now()
		if start.IsZero() && len(first) > 0 {
			start = now.Truncate(every).Add(every).UTC().Round(0)
			end = start.Add(dur)
			if burst > 0 {
				blastDue = start
				blastKey = fmt.Sprintf("bench-blast-%d", start.UnixMilli())
				c := &cluster.Client{Addr: env.addrs[0], HTTP: benchHTTP}
				body := map[string]any{"key": blastKey, "rule": benchBlastRule, "due_at": start.Format(time.RFC3339Nano)}
				if err := c.Do(ctx, http.MethodPost, "/v1/tasks", body, nil); err != nil {
					return nil, fmt.Errorf("bench: submit the burst task: %w", err)
				}
			}
		}
		env.sampleRSS(ctx, rss)
		// Done when the window is over and its last slot was sent, or five
		// seconds later (then it counts as missed).
		if !start.IsZero() && now.After(end) {
			lastSlot := end.Truncate(every)
			if _, ok := first[lastSlot.Unix()]; ok || now.After(end.Add(5*time.Second)) {
				break
			}
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
	res := &precisionResult{Kind: "precision", ForSeconds: dur.Seconds(), Every: every.String(), Recipients: recipients, Burst: burst}
	var toFirst, toLast []time.Duration
	for slot := start; !slot.After(end); slot = slot.Add(every) {
		res.Slots++
		f, ok := first[slot.Unix()]
		if !ok {
			res.Missed++
			continue
		}
		toFirst = append(toFirst, f.Sub(slot))
		toLast = append(toLast, last[slot.Unix()].Sub(slot))
	}
	res.SlotToFirst, res.SlotToLast = summarise(toFirst), summarise(toLast)
	if burst > 0 {
		res.BurstDelivered = len(blastSeen)
		if !blastLast.IsZero() {
			res.BurstToLastMS = ms(blastLast.Sub(blastDue))
		}
	}
	res.PeakRSSMiB = env.peakRSS(ctx, rss)
	return res, nil
}
