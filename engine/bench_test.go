package engine

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkPendingTasks reports what a pending API task costs in memory,
// and how long a snapshot and a restore of 1,000,000 of them take, in the
// current snapshot format and in version 1 (JSON):
//
//	go test ./engine -run '^$' -bench PendingTasks -benchtime 1x
func BenchmarkPendingTasks(b *testing.B) {
	const n = 1_000_000
	for range b.N {
		f := NewFSM()
		cmds := make([][]byte, n)
		for i := range n {
			cmd, err := Encode(CmdSubmitTask, SubmitTask{Key: fmt.Sprintf("enquiry-%07d", i), Rule: "enquiry_timeout",
				DueAt: t0.Add(time.Duration(i) * time.Millisecond), Data: []byte(`{"assignee":"liuyang","enquiry":"8812","level":1}`), Now: t0})
			if err != nil {
				b.Fatal(err)
			}
			cmds[i] = cmd
		}
		before := heap()
		start := time.Now()
		for i, cmd := range cmds {
			f.Apply(uint64(i+1), 1, cmd)
		}
		applyTime := time.Since(start)
		cmds = nil //nolint:ineffassign // let the commands be collected: the heap figure is the state's alone
		after := heap()
		b.ReportMetric(float64(after-before)/n, "bytes/task")
		b.ReportMetric(float64(n)/applyTime.Seconds(), "applies/s")

		start = time.Now()
		snap, err := f.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		if err := snap.Persist(&buf); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "snapshot-s")
		b.ReportMetric(float64(buf.Len())/(1<<20), "snapshot-MiB")

		start = time.Now()
		r := NewFSM()
		if err := r.Restore(&buf); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "restore-s")
		if at, ok := r.NextTaskDue(); !ok || !at.Equal(t0) {
			b.Fatal("restore lost the due queue")
		}
		r = nil //nolint:ineffassign,wastedassign // let it be collected before the next figures

		// The same state written as version 1 (one JSON document) and
		// read back, for comparison.
		start = time.Now()
		v1 := persistV1(b, f)
		b.ReportMetric(time.Since(start).Seconds(), "snapshot-v1-s")
		b.ReportMetric(float64(len(v1))/(1<<20), "snapshot-v1-MiB")
		start = time.Now()
		if err := NewFSM().Restore(bytes.NewReader(v1)); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "restore-v1-s")
		runtime.KeepAlive(f)
	}
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
