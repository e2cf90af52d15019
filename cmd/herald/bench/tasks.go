package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/cmd/herald/internal/cliout"
)

// tasksResult is what `herald bench tasks` measures.
type tasksResult struct {
	Kind  string `json:"kind"`
	Tasks int    `json:"tasks"`
	// Held tasks the cluster held before the fill (--held), loaded by a
	// restore: HeldBuildS to make their backup, HeldRestoreS to restore
	// it; HeldRSSMiB each node's resident set then.
	Held         int                `json:"held"`
	HeldBuildS   float64            `json:"held_build_s,omitempty"`
	HeldRestoreS float64            `json:"held_restore_s,omitempty"`
	HeldBytes    int64              `json:"held_bytes,omitempty"`
	HeldRSSMiB   map[string]float64 `json:"held_rss_mib,omitempty"`
	Concurrency  int                `json:"concurrency"`
	Via          string             `json:"via"` // the follower the tasks were submitted through
	FillS        float64            `json:"fill_s"`
	// SubmitsPerSecond is over the whole fill; LastTenthPerSecond over its
	// last tenth, when the cluster already holds nine tenths.
	SubmitsPerSecond   float64 `json:"submits_per_second"`
	LastTenthPerSecond float64 `json:"last_tenth_per_second"`
	// CPUMsPerSubmit is the CPU the three nodes spent over the fill
	// (process_cpu_seconds_total), per submission: steadier than the
	// rate on a machine shared with other work.
	CPUMsPerSubmit  float64 `json:"cpu_ms_per_submit"`
	Pending         float64 `json:"pending"` // herald_tasks_pending on the leader after the fill
	SnapshotS       float64 `json:"snapshot_s"`
	SnapshotBytes   int64   `json:"snapshot_bytes"`
	RestoreS        float64 `json:"restore_s"`
	PendingRestored float64 `json:"pending_restored"` // herald_tasks_pending on the leader after the restore
	Wiped           string  `json:"wiped"`
	CatchUpS        float64 `json:"catch_up_s"`
	// After the fill, before the backup: each node's resident set now and
	// its Go heap in use (process_resident_memory_bytes,
	// go_memstats_heap_inuse_bytes), what the peak is made of.
	FilledRSSMiB  map[string]float64 `json:"filled_rss_mib"`
	FilledHeapMiB map[string]float64 `json:"filled_heap_mib"`
	PeakRSSMiB    map[string]float64 `json:"peak_rss_mib"`
}

func newBenchTasksCmd(o *benchOpts) *cobra.Command {
	var n, held, concurrency, profileSeconds int
	var due time.Duration
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "N pending API tasks: fill through a follower, snapshot, restore, a wiped follower's catch-up",
		Long: `Fills a local three-node cluster with N pending API tasks (due in --due,
so none fires during the bench), submitted through a follower by
--concurrency clients at once, each POST /v1/tasks one task (the leader
batches what arrives together into its Raft appends); prints the
submissions per second over the whole fill and over its last tenth. Then
takes a backup of the state (GET /v1/snapshot, from the follower: time
and size), restores it (PUT /v1/snapshot: time), and finally stops a
follower, empties its data dir and starts it again: the time until it has
applied everything the leader had.

With --held K the cluster first holds K pending tasks, and the fill's
rate is what submissions get while it does: K submissions would take
hours at a few thousand a second, so the bench applies them to the
cluster's own state in an engine state machine of its own (SubmitTasks
entries of 1,000, as a busy leader's group commit makes them), writes
that state as a backup and restores it through the follower (time and
size printed). The backup, restore and catch-up then move K+N. Needs the local
cluster (it restores over the state and wipes a node): no --addr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.addr != "" {
				return errors.New("bench tasks restores over the cluster's state and wipes a node: it runs on its own local cluster, not with --addr")
			}
			if n <= 0 || concurrency <= 0 || due <= 0 {
				return errors.New("--n, --concurrency and --due must be positive")
			}
			if held < 0 {
				return errors.New("--held must not be negative")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			res, err := runTasks(ctx, o, n, held, concurrency, due, profileSeconds)
			if err != nil {
				return err
			}
			if o.asJSON {
				return cliout.EmitJSON(cmd, res)
			}
			var rows [][2]string
			if held > 0 {
				rows = append(rows,
					[2]string{"held tasks: backup made", fmt.Sprintf("%.2f s, %s", res.HeldBuildS, fmtBytes(float64(res.HeldBytes)))},
					[2]string{"held tasks: restored", fmt.Sprintf("%.2f s", res.HeldRestoreS)},
					[2]string{"RSS holding them", fmtRSS(res.HeldRSSMiB)})
			}
			printTable(cmd, fmt.Sprintf("herald bench tasks: %d pending API tasks held, %d submitted by %d clients through %s", held, n, concurrency, res.Via), append(rows, [][2]string{
				{"fill", fmt.Sprintf("%.2f s", res.FillS)},
				{"submissions/s (all)", fmt.Sprintf("%.0f", res.SubmitsPerSecond)},
				{"submissions/s (last tenth)", fmt.Sprintf("%.0f", res.LastTenthPerSecond)},
				{"node CPU per submission", fmt.Sprintf("%.2f ms (three nodes together)", res.CPUMsPerSubmit)},
				{"pending on the leader", fmt.Sprintf("%.0f", res.Pending)},
				{"RSS after the fill", fmtRSS(res.FilledRSSMiB)},
				{"Go heap in use after the fill", fmtRSS(res.FilledHeapMiB)},
				{"snapshot (backup)", fmt.Sprintf("%.2f s, %s", res.SnapshotS, fmtBytes(float64(res.SnapshotBytes)))},
				{"restore", fmt.Sprintf("%.2f s (pending after: %.0f)", res.RestoreS, res.PendingRestored)},
				{"wiped follower caught up", fmt.Sprintf("%.2f s (%s)", res.CatchUpS, res.Wiped)},
				{"peak RSS per node", fmtRSS(res.PeakRSSMiB)},
			}...))
			return nil
		},
	}
	cmd.Flags().IntVar(&n, "n", 100000, "pending API tasks to fill the cluster with")
	cmd.Flags().IntVar(&held, "held", 0, "pending API tasks the cluster holds before the fill, loaded by a restore")
	cmd.Flags().IntVar(&concurrency, "concurrency", 64, "submissions in flight at once")
	cmd.Flags().DurationVar(&due, "due", 30*24*time.Hour, "the tasks are due this long after the fill starts")
	cmd.Flags().StringVar(&o.profile, "profile", "", "write the CPU profiles (from the fill's start, --profile-seconds long) and allocation profiles (after the fill) of the leader (cpu.pprof, allocs.pprof) and of the follower the tasks go through (follower-cpu.pprof, follower-allocs.pprof) into this directory")
	cmd.Flags().IntVar(&profileSeconds, "profile-seconds", 30, "length of the CPU profile")
	return cmd
}

const benchTasksRule = "bench_tasks"

// fillResult is what fillTasks measured.
type fillResult struct {
	took, lastTenth time.Duration
}

// fillTasks submits n tasks of rule, due at due, to addr from concurrency
// clients at once (taskBody; resubmitting one already taken is a 200). It
// stops at the first refusal.
func fillTasks(ctx context.Context, addr, rule string, from, n, concurrency int, due time.Time) (fillResult, error) {
	c := &cluster.Client{Addr: addr, HTTP: benchHTTP}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next, done atomic.Int64
	var tenthAt atomic.Int64 // unix nanos when nine tenths were done
	nineTenths := int64(n - n/10)
	start := time.Now()
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for range min(concurrency, n) {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				if err := submitRetrying(ctx, c, taskBody(int64(from)+i, rule, due)); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("bench: task %d: %w", int64(from)+i, err) })
					cancel()
					return
				}
				if done.Add(1) == nineTenths {
					tenthAt.Store(time.Now().UnixNano())
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return fillResult{}, firstErr
	}
	end := time.Now()
	res := fillResult{took: end.Sub(start)}
	if t := tenthAt.Load(); t != 0 {
		res.lastTenth = end.Sub(time.Unix(0, t))
	}
	return res, nil
}

func runTasks(ctx context.Context, o *benchOpts, n, held, concurrency int, due time.Duration, profileSeconds int) (*tasksResult, error) {
	env, err := o.setup(ctx, 0, nil)
	if err != nil {
		return nil, err
	}
	defer env.close()
	c := env.local
	if err := env.writeRule(benchTasksRule, benchRule(benchTasksRule, "", env.channel, "2h", "return { run.data.owner }")); err != nil {
		return nil, err
	}
	leader, err := c.leader(ctx)
	if err != nil {
		return nil, err
	}
	// The follower the tasks go through, and the one wiped: not the node
	// that bootstrapped (its config has no --join to come back with).
	var via *benchNode
	for _, n := range c.live() {
		if n != leader && n != c.nodes[0] {
			via = n
			break
		}
	}
	if via == nil {
		return nil, errors.New("bench: no follower that joined (the cluster is not whole)")
	}
	dueAt := time.Now().Add(due)
	if err := waitRule(ctx, via.http, benchTasksRule, dueAt); err != nil {
		return nil, err
	}
	res := &tasksResult{Kind: "tasks", Tasks: n, Held: held, Concurrency: concurrency, Via: via.id, Wiped: via.id}
	rss := map[string]uint64{}
	if held > 0 {
		h, err := holdTasks(ctx, via.http, env.dir, benchTasksRule, held, dueAt)
		if err != nil {
			return nil, err
		}
		res.HeldBuildS, res.HeldRestoreS, res.HeldBytes = h.buildS, h.restoreS, h.bytes
		env.sampleRSS(ctx, rss)
		res.HeldRSSMiB = c.gaugeMiB(ctx, "process_resident_memory_bytes")
	}

	var prof *profiler
	if o.profile != "" {
		if prof, err = startProfile(ctx, o.profile, leader.pprof, via.pprof, profileSeconds); err != nil {
			return nil, err
		}
	}
	cpu0 := sumMetric(ctx, env.addrs, "process_cpu_seconds_total")
	fill, err := fillTasks(ctx, via.http, benchTasksRule, held, n, concurrency, dueAt)
	if err != nil {
		return nil, err
	}
	res.CPUMsPerSubmit = (sumMetric(ctx, env.addrs, "process_cpu_seconds_total") - cpu0) * 1000 / float64(n)
	if prof != nil {
		if err := prof.finish(ctx); err != nil {
			return nil, fmt.Errorf("bench: profile: %w", err)
		}
	}
	res.FillS = fill.took.Seconds()
	res.SubmitsPerSecond = float64(n) / fill.took.Seconds()
	if fill.lastTenth > 0 {
		res.LastTenthPerSecond = float64(n/10) / fill.lastTenth.Seconds()
	}
	env.sampleRSS(ctx, rss)
	if leader, err = c.leader(ctx); err != nil {
		return nil, err
	}
	res.Pending, _ = scrapeMetric(ctx, leader.http, "herald_tasks_pending")
	res.FilledRSSMiB = c.gaugeMiB(ctx, "process_resident_memory_bytes")
	res.FilledHeapMiB = c.gaugeMiB(ctx, "go_memstats_heap_inuse_bytes")

	// Backup and restore stream the whole state: no client timeout but
	// the bench's own.
	long := &http.Client{}
	backup := filepath.Join(env.dir, "tasks.backup")
	f, err := os.Create(backup)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	_, err = (&cluster.Client{Addr: via.http, HTTP: long}).Backup(ctx, f)
	res.SnapshotS = time.Since(t0).Seconds()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("bench: snapshot: %w", err)
	}
	st, err := os.Stat(backup)
	if err != nil {
		return nil, err
	}
	res.SnapshotBytes = st.Size()
	env.sampleRSS(ctx, rss)

	t0 = time.Now()
	answer, err := restoreRetrying(ctx, &cluster.Client{Addr: via.http, HTTP: long}, backup)
	res.RestoreS = time.Since(t0).Seconds()
	if err != nil {
		return nil, fmt.Errorf("bench: restore: %w", err)
	}
	if leader, err = c.leader(ctx); err != nil {
		return nil, err
	}
	res.PendingRestored, _ = scrapeMetric(ctx, leader.http, "herald_tasks_pending")
	env.sampleRSS(ctx, rss)

	// The wiped follower: everything up to the leader's index now must
	// reach it (by a snapshot install, then the log's tail).
	target := answer.Index
	if st, err := benchStatus(ctx, leader.http); err == nil && st.AppliedIndex > target {
		target = st.AppliedIndex
	}
	c.stop1(via)
	if err := os.RemoveAll(filepath.Join(c.dir, via.id)); err != nil {
		return nil, err
	}
	t0 = time.Now()
	if err := c.startNode(via); err != nil {
		return nil, err
	}
	for {
		st, err := benchStatus(ctx, via.http)
		if err == nil && st.AppliedIndex >= target {
			break
		}
		if via.done() {
			return nil, fmt.Errorf("bench: the wiped follower %s exited (log in %s)", via.id, via.logPath)
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return nil, fmt.Errorf("bench: the wiped follower %s did not catch up: %w", via.id, ctx.Err())
		}
	}
	res.CatchUpS = time.Since(t0).Seconds()
	res.PeakRSSMiB = env.peakRSS(ctx, rss)
	return res, nil
}

// gaugeMiB is a gauge of bytes of each live node, in MiB; a node that
// does not answer is left out.
func (c *benchCluster) gaugeMiB(ctx context.Context, name string) map[string]float64 {
	out := map[string]float64{}
	for _, n := range c.live() {
		if v, err := scrapeMetric(ctx, n.http, name); err == nil {
			out[n.id] = v / (1 << 20)
		}
	}
	return out
}

// submitRetrying submits one task, again while the cluster answers 503
// (changing leaders; the same task again is a 200), for up to a minute.
func submitRetrying(ctx context.Context, c *cluster.Client, body map[string]any) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Do(ctx, http.MethodPost, "/v1/tasks", body, nil)
		var apiErr *cluster.APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return err
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// waitRule waits until a node takes a task of rule (one it has not
// loaded yet is refused) by submitting the first task until it is taken.
func waitRule(ctx context.Context, addr, rule string, due time.Time) error {
	c := &cluster.Client{Addr: addr, HTTP: benchHTTP}
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Do(ctx, http.MethodPost, "/v1/tasks", taskBody(0, rule, due), nil)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: the first task was not taken within a minute: %w", err)
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// taskBody is the i-th bench task: key bench-task-00000000…, about 52
// bytes of data, the size BenchmarkPendingTasks holds.
func taskBody(i int64, rule string, due time.Time) map[string]any {
	return map[string]any{
		"key": taskKey(i), "rule": rule, "due_at": due.Format(time.RFC3339Nano),
		"data": map[string]any{"customer": fmt.Sprintf("customer-%08d", i), "owner": "bench-owner"},
	}
}

func taskKey(i int64) string { return fmt.Sprintf("bench-task-%08d", i) }

// stop1 stops one node (SIGTERM to its group, SIGKILL after 20 seconds),
// recording its peak RSS first.
func (c *benchCluster) stop1(n *benchNode) {
	n.sampleRSS()
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(20 * time.Second):
		c.kill(n)
	}
}
