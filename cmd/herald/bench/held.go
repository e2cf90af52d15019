package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/engine"
)

// heldBatch is how many tasks one SubmitTasks entry of the held state
// carries: what a busy leader's group commit takes together.
const heldBatch = 1000

// heldResult is what loading the held tasks measured.
type heldResult struct {
	buildS, restoreS float64
	bytes            int64
}

// holdTasks makes the cluster hold k pending tasks of rule, due at due,
// without submitting them one by one (ten million at a few thousand a
// second is hours): it takes a backup of the cluster through via, applies
// k submissions to that state in an engine state machine of its own, as
// the members would have applied them (SubmitTasks entries of heldBatch,
// the bench's task bodies, indexes after the backup's), writes the result
// as a backup in dir and restores it through via. What the members then
// hold is what k submissions would have left, through the members' own
// restore path.
func holdTasks(ctx context.Context, via, dir, rule string, k int, due time.Time) (heldResult, error) {
	var res heldResult
	t0 := time.Now()
	long := &cluster.Client{Addr: via, HTTP: &http.Client{}}
	var small bytes.Buffer
	h, err := long.Backup(ctx, &small)
	if err != nil {
		return res, fmt.Errorf("bench: backup before holding tasks: %w", err)
	}
	_, body, err := cluster.OpenBackup(&small)
	if err != nil {
		return res, err
	}
	f := engine.NewFSM()
	if err := f.Restore(body); err != nil {
		return res, fmt.Errorf("bench: the cluster's backup does not read: %w", err)
	}
	index := f.AppliedIndex()
	now := time.Now()
	for i := 0; i < k; i += heldBatch {
		batch := engine.SubmitTasks{Tasks: make([]engine.SubmitTask, 0, heldBatch)}
		for j := i; j < min(i+heldBatch, k); j++ {
			batch.Tasks = append(batch.Tasks, heldTask(int64(j), rule, due, now))
		}
		cmd, err := engine.Encode(engine.CmdSubmitTasks, batch)
		if err != nil {
			return res, err
		}
		index++
		for j, out := range f.Apply(index, h.Term, cmd).([]any) {
			if err, ok := out.(error); ok {
				return res, fmt.Errorf("bench: held task %d: %w", i+j, err)
			}
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	state, err := os.CreateTemp(dir, "held-*.state")
	if err != nil {
		return res, err
	}
	defer func() {
		state.Close()
		_ = os.Remove(state.Name())
	}()
	snap, err := f.Snapshot()
	if err != nil {
		return res, err
	}
	bw := bufio.NewWriterSize(state, 1<<20)
	if err := snap.Persist(bw); err != nil {
		return res, err
	}
	if err := bw.Flush(); err != nil {
		return res, err
	}
	f, snap = nil, nil   //nolint:ineffassign,wastedassign // the state is on disk: let it go before the nodes load it
	debug.FreeOSMemory() // and give its pages back: the nodes beside this process need them
	if h.Size, err = state.Seek(0, io.SeekCurrent); err != nil {
		return res, err
	}
	if _, err := state.Seek(0, io.SeekStart); err != nil {
		return res, err
	}
	h.Index, h.Created = index, time.Now().UTC()
	backup := filepath.Join(dir, "held.backup")
	out, err := os.Create(backup)
	if err != nil {
		return res, err
	}
	bw = bufio.NewWriterSize(out, 1<<20)
	err = cluster.WriteBackup(bw, h, bufio.NewReaderSize(state, 1<<20))
	if err == nil {
		err = bw.Flush()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return res, err
	}
	defer func() { _ = os.Remove(backup) }()
	res.buildS, res.bytes = time.Since(t0).Seconds(), h.Size

	t0 = time.Now()
	if _, err := restoreRetrying(ctx, long, backup); err != nil {
		return res, fmt.Errorf("bench: restore of the held tasks: %w", err)
	}
	res.restoreS = time.Since(t0).Seconds()
	return res, nil
}

// restoreRetrying restores the backup in file through c, again (up to
// three times) while the answer is a 503: the leader changed before the
// restore began (a state of millions takes minutes to check, and on two
// shared cores a leader that busy may miss its lease), and nothing was
// restored.
func restoreRetrying(ctx context.Context, c *cluster.Client, file string) (cluster.RestoreAnswer, error) {
	for try := 1; ; try++ {
		in, err := os.Open(file)
		if err != nil {
			return cluster.RestoreAnswer{}, err
		}
		answer, err := c.Restore(ctx, in)
		_ = in.Close()
		var apiErr *cluster.APIError
		if err == nil || try == 3 || !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable {
			return answer, err
		}
		fmt.Fprintf(os.Stderr, "bench: restore refused (%v); again\n", err)
	}
}

// heldTask is the i-th held task, in the form the API would have
// submitted taskBody(i, …) (the bench's fill continues after the held
// ones, so no key is submitted twice).
func heldTask(i int64, rule string, due, now time.Time) engine.SubmitTask {
	data, _ := json.Marshal(taskBody(i, rule, due)["data"])
	return engine.SubmitTask{Key: taskKey(i), Rule: rule, DueAt: due.UTC(), Data: data, Now: now}
}
