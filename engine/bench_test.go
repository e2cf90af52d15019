package engine

// The engine's benchmarks (memory and snapshot cost of the state), in one
// file as in the other packages.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// BenchmarkPendingTasks reports what a pending API task costs in memory,
// and how long a snapshot and a restore of 1,000,000 of them take, in the
// current snapshot format (tasks packed), with every task a gob record (a
// member on an older build) and in version 1 (JSON):
//
//	go test ./engine -run '^$' -bench PendingTasks -benchtime 1x
func BenchmarkPendingTasks(b *testing.B) {
	const n = 1_000_000
	for range b.N {
		// Measured before the commands are made: they are collected
		// before the second figure, which must not count them out.
		before := heap()
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

		// And as a cluster with a member on an older build writes it:
		// every task a gob record, not packed (snapshot_tasks.go).
		f.Apply(n+1, 1, mustEncode(b, CmdUpsertMember, Member{ID: "old", FSMVersion: FSMPackedTasks - 1}))
		start = time.Now()
		if snap, err = f.Snapshot(); err != nil {
			b.Fatal(err)
		}
		buf.Reset()
		if err := snap.Persist(&buf); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "snapshot-gob-s")
		b.ReportMetric(float64(buf.Len())/(1<<20), "snapshot-gob-MiB")
		start = time.Now()
		if err := NewFSM().Restore(&buf); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "restore-gob-s")
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

// BenchmarkDeliveryMemory reports what 100,000 deliveries of one run (the
// 9:00 burst: one payload for everyone) cost the state: live heap per
// delivery once planned and once sent, and allocations per delivery over
// plan, claim and result, applied as the leader proposes them (plan chunks
// of 500, claims of 1000):
//
//	go test ./engine -run '^$' -bench DeliveryMemory -benchtime 1x
func BenchmarkDeliveryMemory(b *testing.B) {
	const n = 100_000
	for range b.N {
		f := NewFSM()
		key := RunKey("burst", t0)
		plan := [][]byte{mustEncode(b, CmdStartRun, StartRun{Key: key, Rule: "burst", Slot: t0, Now: t0})}
		ids := make([]string, n)
		for start := 0; start < n; start += 500 {
			nds := make([]NewDelivery, 0, 500)
			for i := start; i < start+500; i++ {
				who := fmt.Sprintf("user%06d", i)
				ids[i] = DeliveryID(key, who)
				nds = append(nds, NewDelivery{ID: ids[i], Recipient: who, Channel: "mock",
					Payload: json.RawMessage(`{"msgtype":"text","content":"burst@2026-12-01T01:00:00Z"}`), Priority: heraldtype.PriorityNormal,
					NotBefore: t0, Deadline: t0.Add(2 * time.Hour)})
			}
			plan = append(plan, mustEncode(b, CmdAddDeliveries, AddDeliveries{RunKey: key, Deliveries: nds}))
		}
		plan = append(plan, mustEncode(b, CmdFinishPlan, FinishPlan{RunKey: key, Now: t0}))
		var claims, results [][]byte
		for start := 0; start < n; start += 1000 {
			claims = append(claims, mustEncode(b, CmdClaim, ClaimDeliveries{IDs: ids[start : start+1000], Leader: "n1", Now: t0, Timeout: time.Minute}))
			rs := make([]Settlement, 0, 1000)
			for _, id := range ids[start : start+1000] {
				rs = append(rs, Settlement{ID: id, Seq: 1, Status: heraldtype.StatusSent, ProviderID: "mock-" + id[:8]})
			}
			results = append(results, mustEncode(b, CmdRecordResults, RecordResults{Leader: "n1", Now: t0.Add(time.Second), Results: rs}))
		}
		index := uint64(0)
		applyAll := func(cmds [][]byte) {
			for _, cmd := range cmds {
				index++
				if err, ok := f.Apply(index, 1, cmd).(error); ok {
					b.Fatal(err)
				}
			}
		}
		base := heap()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		start := time.Now()
		applyAll(plan)
		took := time.Since(start)
		planned := heap()
		start = time.Now()
		applyAll(claims)
		applyAll(results)
		took += time.Since(start)
		runtime.ReadMemStats(&m1)
		sent := heap()
		if d, _ := f.Delivery(ids[n-1]); d.State != StateSent {
			b.Fatal("not sent")
		}
		b.ReportMetric(float64(planned-base)/n, "bytes/planned")
		b.ReportMetric(float64(sent-base)/n, "bytes/sent")
		b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/n, "allocs/delivery")
		b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/n, "alloc-bytes/delivery")
		b.ReportMetric(float64(took.Nanoseconds())/n, "apply-ns/delivery")
		runtime.KeepAlive(plan)
		runtime.KeepAlive(claims)
		runtime.KeepAlive(results)
	}
}

// BenchmarkSnapshotCapture reports how long FSM.Snapshot holds off Apply
// (hashicorp/raft calls it with Apply paused) at 1,000,000 pending API
// tasks and 100,000 deliveries; Persist then runs beside Apply:
//
//	go test ./engine -run '^$' -bench SnapshotCapture -benchtime 20x
func BenchmarkSnapshotCapture(b *testing.B) {
	f := NewFSM()
	index := uint64(0)
	apply := func(cmd []byte) {
		index++
		if err, ok := f.Apply(index, 1, cmd).(error); ok {
			b.Fatal(err)
		}
	}
	for i := range 1_000_000 {
		apply(mustEncode(b, CmdSubmitTask, SubmitTask{Key: fmt.Sprintf("enquiry-%07d", i), Rule: "enquiry_timeout",
			DueAt: t0.Add(time.Duration(i) * time.Millisecond), Data: []byte(`{"assignee":"liuyang","enquiry":"8812","level":1}`), Now: t0}))
	}
	key := RunKey("burst", t0)
	apply(mustEncode(b, CmdStartRun, StartRun{Key: key, Rule: "burst", Slot: t0, Now: t0}))
	for start := 0; start < 100_000; start += 500 {
		nds := make([]NewDelivery, 0, 500)
		for i := start; i < start+500; i++ {
			who := fmt.Sprintf("user%06d", i)
			nds = append(nds, NewDelivery{ID: DeliveryID(key, who), Recipient: who, Channel: "mock",
				Payload: json.RawMessage(`{"msgtype":"text","content":"hi"}`), Priority: heraldtype.PriorityNormal, NotBefore: t0, Deadline: t0.Add(2 * time.Hour)})
		}
		apply(mustEncode(b, CmdAddDeliveries, AddDeliveries{RunKey: key, Deliveries: nds}))
	}
	// Writes between snapshots, as in a live cluster: a capture that
	// defers its copying pays for it in the next writes, reported as the
	// slowest first plan chunk (500 deliveries) and first claim of 1,000
	// after a snapshot.
	var snaps []Snapshot
	var firstChunk, firstClaim time.Duration
	b.ResetTimer()
	for i := range b.N {
		s, err := f.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		snaps = append(snaps, s)
		b.StopTimer()
		nds := make([]NewDelivery, 0, 500)
		for j := range 500 {
			who := fmt.Sprintf("more%03d-%03d", i, j)
			nds = append(nds, NewDelivery{ID: DeliveryID(key, who), Recipient: who, Channel: "mock",
				Payload: json.RawMessage(`{"msgtype":"text","content":"hi"}`), Priority: heraldtype.PriorityNormal, NotBefore: t0, Deadline: t0.Add(2 * time.Hour)})
		}
		chunk := mustEncode(b, CmdAddDeliveries, AddDeliveries{RunKey: key, Deliveries: nds})
		ids := make([]string, 0, 1000)
		for j := range 1000 {
			ids = append(ids, DeliveryID(key, fmt.Sprintf("user%06d", (i*1000+j)%100_000)))
		}
		claim := mustEncode(b, CmdClaim, ClaimDeliveries{IDs: ids, Leader: "n1", Now: t0, Timeout: time.Minute})
		start := time.Now()
		apply(chunk)
		firstChunk = max(firstChunk, time.Since(start))
		start = time.Now()
		apply(claim)
		firstClaim = max(firstClaim, time.Since(start))
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(firstChunk.Microseconds())/1000, "first-chunk-ms")
	b.ReportMetric(float64(firstClaim.Microseconds())/1000, "first-claim-ms")
	for _, s := range snaps {
		s.Release()
	}
}
