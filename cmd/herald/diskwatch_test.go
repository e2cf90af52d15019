package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/engine"
)

// A member whose log writes fail is alerted by the leader at its next
// pass, naming the node and the error, once per failure; the alert is
// resolved (acknowledged) when the member writes again; a new failure
// re-opens it. Unknown members and followers change nothing.
func TestWatchDiskWriteAlert(t *testing.T) {
	t.Parallel()
	b := setupWatch(t)
	since := time.Date(2026, 12, 1, 0, 59, 58, 0, time.UTC)
	full := "write raft.db: no space left on device"
	failing := &cluster.Report{NodeID: "n2", DataDirFreeBytes: 0,
		Log: cluster.WriteHealth{Failures: 3, LastError: full, LastErrorAt: since, FailingSince: since}}
	b.reports = []cluster.MemberReport{
		{ID: "n1", Report: &cluster.Report{NodeID: "n1", DataDirFreeBytes: 1 << 30}},
		{ID: "n2", Report: failing},
		{ID: "n3", Unknown: "its build has no reports (an older build)"},
	}
	b.leader = false
	b.step(0)
	require.Empty(t, b.raised, "followers raise nothing")

	b.leader = true
	b.step(10 * time.Second)
	require.Len(t, b.raised, 1)
	a := b.raised[0]
	require.Equal(t, "disk-write:n2", a.Cause)
	require.Equal(t, engine.AlertDiskWrite, a.Kind)
	require.Equal(t, []string{"n2"}, a.Params.Nodes)
	require.Equal(t, full, a.Params.Error)
	require.Equal(t, since, a.Params.Since)
	require.Equal(t, "node n2 cannot write its Raft log since 2026-12-01T00:59:58Z: "+full+
		"; it stores no new Raft entries until it can (a leader steps down): free space in its data dir or replace the disk (0 bytes free)", a.Message)

	failing.Log.Failures, failing.DataDirFreeBytes = 9, 4096
	b.step(10 * time.Second)
	require.Len(t, b.raised, 1, "the same failure is raised once")

	// A new leader (nothing in memory) finds it raised already.
	b.w = newOpsWatch(b.w)
	b.w.diskRaised = map[string]string{}
	b.step(10 * time.Second)
	require.Len(t, b.raised, 1, "an earlier leader raised it")

	ok := *failing
	ok.Log.FailingSince = time.Time{}
	b.reports[1].Report = &ok
	b.step(10 * time.Second)
	require.Equal(t, []string{engine.AlertID("disk-write:n2")}, b.acked, "resolved once it writes again")
	b.step(10 * time.Second)
	require.Len(t, b.acked, 1, "once")

	again := *failing
	again.Log.FailingSince = since.Add(time.Hour)
	b.reports[1].Report = &again
	b.step(10 * time.Second)
	require.Len(t, b.raised, 2, "failing again re-opens it")
	require.Contains(t, b.raised[1].Message, "since 2026-12-01T01:59:58Z")

	// Unknown: neither raised nor resolved on a guess.
	b.reports[1] = cluster.MemberReport{ID: "n2", Unknown: "connection refused"}
	b.step(10 * time.Second)
	require.Len(t, b.acked, 1)
	require.Len(t, b.raised, 2)
}

// Snapshots that cannot be written alert too.
func TestWatchDiskWriteAlertForSnapshots(t *testing.T) {
	t.Parallel()
	b := setupWatch(t)
	since := time.Date(2026, 12, 1, 0, 59, 0, 0, time.UTC)
	b.reports = []cluster.MemberReport{{ID: "n1", Report: &cluster.Report{NodeID: "n1",
		Snapshot: cluster.WriteHealth{Failures: 1, LastError: "sync state.bin: input/output error", FailingSince: since}}}}
	b.step(0)
	require.Len(t, b.raised, 1)
	require.Contains(t, b.raised[0].Message, "node n1 cannot write snapshots since 2026-12-01T00:59:00Z: sync state.bin: input/output error")
	require.Equal(t, "sync state.bin: input/output error", b.raised[0].Params.Error)
}

// TestLeaderThatCannotWriteItsLogIsAlerted: three whole nodes; the
// leader's Raft log writes start failing (a full disk) while tasks are
// submitted. Leadership moves, the next leader raises the disk-write
// alert naming the node and the error within a minute, and resolves it
// once the node writes again; every task whose submission was
// acknowledged is on every node.
func TestLeaderThatCannotWriteItsLogIsAlerted(t *testing.T) {
	var faults [3]atomic.Pointer[error]
	c := startInProcessWith(t, func(i int, cfg *nodeConfig) {
		if i == 0 {
			require.NoError(t, os.WriteFile(filepath.Join(cfg.Rules, "remind.lua"), []byte(remindRule), 0o644))
		}
		// The log only: raft panics when it cannot save its term or vote
		// (the stable store), which a full disk may allow or not.
		cfg.writeFault = func(store string) error {
			if e := faults[i].Load(); e != nil && store == "log" {
				return *e
			}
			return nil
		}
	})
	var sick int
	eventually(t, 10*time.Second, "a leader", func() bool { return c.leader() != nil })
	for i, n := range c.nodes {
		if n == c.leader() {
			sick = i
		}
	}
	sickID := c.nodes[sick].cfg.NodeID

	var (
		mu    sync.Mutex
		acked []string
		stop  = make(chan struct{})
		done  = make(chan struct{})
	)
	ackedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	go func() {
		defer close(done)
		hc := &http.Client{Timeout: 5 * time.Second}
		pace := time.NewTicker(20 * time.Millisecond) // a steady stream, not all the CPU
		defer pace.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-pace.C:
			}
			key := fmt.Sprintf("disk-%d", i)
			body := `{"key":"` + key + `","rule":"remind","due_at":"` + time.Now().Add(time.Hour).Format(time.RFC3339) + `"}`
			resp, err := hc.Post("http://"+c.nodes[i%3].cfg.HTTPAddr+"/v1/tasks", "application/json", strings.NewReader(body))
			if err != nil {
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusCreated {
				mu.Lock()
				acked = append(acked, key)
				mu.Unlock()
			}
		}
	}()
	eventually(t, 20*time.Second, "tasks acknowledged", func() bool { return ackedNow() >= 5 })

	full := errors.New("write raft.db: no space left on device")
	faults[sick].Store(&full)
	cause := "disk-write:" + sickID
	type alertView struct {
		Cause   string           `json:"cause"`
		Kind    engine.AlertKind `json:"kind"`
		Message string           `json:"message"`
		Acked   bool             `json:"acked"`
	}
	alertOf := func() (alertView, bool) {
		for _, n := range c.nodes {
			var v struct {
				Alerts []alertView `json:"alerts"`
			}
			if getJSON(n.cfg.HTTPAddr, "/v1/alerts", &v) != nil {
				continue
			}
			for _, a := range v.Alerts {
				if a.Cause == cause {
					return a, true
				}
			}
		}
		return alertView{}, false
	}
	took := eventually(t, time.Minute, "the disk-write alert", func() bool {
		a, ok := alertOf()
		return ok && !a.Acked
	})
	a, _ := alertOf()
	require.Equal(t, engine.AlertDiskWrite, a.Kind)
	require.Contains(t, a.Message, "node "+sickID+" cannot write its Raft log since ")
	require.Contains(t, a.Message, full.Error())
	require.NotEqual(t, c.nodes[sick], c.leader(), "a leader that cannot write its log steps down")
	t.Logf("alert %s after the leader's writes began to fail: %s", took.Round(time.Millisecond), a.Message)
	before := ackedNow()
	eventually(t, 20*time.Second, "the new leader takes tasks", func() bool { return ackedNow() >= before+5 })

	faults[sick].Store(nil)
	took = eventually(t, time.Minute, "the alert resolved", func() bool {
		a, ok := alertOf()
		return ok && a.Acked
	})
	t.Logf("resolved %s after the writes succeed again", took.Round(time.Millisecond))
	close(stop)
	<-done

	mu.Lock()
	defer mu.Unlock()
	for _, n := range c.nodes {
		eventually(t, 30*time.Second, "every acknowledged task on "+n.cfg.NodeID, func() bool {
			for _, k := range acked {
				if _, ok := n.fsm.Task(k); !ok {
					return false
				}
			}
			return true
		})
	}
	t.Logf("%d acknowledged tasks on all three nodes", len(acked))
}
