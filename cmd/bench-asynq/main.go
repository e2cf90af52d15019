// Command bench-asynq runs `herald bench burst`'s workload on asynq and
// Redis, for comparison in the same window on the same machine: N tasks
// scheduled for one slot, no stagger, handled by a worker pool that
// appends each message to an outbox file, as Herald's mock channel does.
// Redis runs in memory (no persistence, no replication): a lower bar than
// Herald's three replicated nodes.
//
// It is a module of its own so that Herald never depends on asynq. It
// starts a private redis-server (found on the PATH, or --redis-server) on
// a free loopback port and stops it at the end.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
)

type result struct {
	Kind           string    `json:"kind"`
	Messages       int       `json:"messages"`
	Delivered      int       `json:"delivered"`
	Workers        int       `json:"workers"`
	Slot           time.Time `json:"slot"`
	EnqueueMS      float64   `json:"enqueue_ms"` // scheduling all N tasks (the plan)
	SlotToSend     latencies `json:"slot_to_send"`
	SendsPerSecond float64   `json:"sends_per_second"`
	PeakRSSMiB     struct {
		Redis float64 `json:"redis"`
		Bench float64 `json:"bench"`
	} `json:"peak_rss_mib"`
}

type latencies struct {
	N     int     `json:"n"`
	First float64 `json:"first_ms"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

func main() {
	n := flag.Int("n", 100000, "tasks of the slot")
	workers := flag.Int("workers", 64, "asynq worker concurrency")
	lead := flag.Duration("lead", 30*time.Second, "the slot is this long after the start (enqueuing must finish before it)")
	redisBin := flag.String("redis-server", "redis-server", "the redis-server binary")
	asJSON := flag.Bool("json", false, "print the result as JSON")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	res, err := run(ctx, *n, *workers, *lead, *redisBin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-asynq:", err)
		os.Exit(1)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
		return
	}
	fmt.Printf("asynq + redis burst: %d messages, one slot (%s), %d workers\n", res.Messages, res.Slot.Format(time.RFC3339), res.Workers)
	rows := [][2]string{
		{"delivered", fmt.Sprintf("%d of %d", res.Delivered, res.Messages)},
		{"enqueue (plan)", fmtMS(res.EnqueueMS)},
		{"slot → first send", fmtMS(res.SlotToSend.First)},
		{"slot → p50 send", fmtMS(res.SlotToSend.P50)},
		{"slot → p99 send", fmtMS(res.SlotToSend.P99)},
		{"slot → last send", fmtMS(res.SlotToSend.Max)},
		{"sends/s (first to last)", fmt.Sprintf("%.0f", res.SendsPerSecond)},
		{"peak RSS", fmt.Sprintf("redis %.0f MiB, bench %.0f MiB", res.PeakRSSMiB.Redis, res.PeakRSSMiB.Bench)},
	}
	for _, r := range rows {
		fmt.Printf("  %-24s  %s\n", r[0], r[1])
	}
}

func run(ctx context.Context, n, workers int, lead time.Duration, redisBin string) (*result, error) {
	bin, err := exec.LookPath(redisBin)
	if err != nil {
		return nil, fmt.Errorf("no redis-server: %w", err)
	}
	dir, err := os.MkdirTemp("", "bench-asynq-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	addr, redisCmd, err := startRedis(ctx, bin, dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = redisCmd.Process.Signal(syscall.SIGTERM)
		_ = redisCmd.Wait()
	}()
	opt := asynq.RedisClientOpt{Addr: addr}

	slot := time.Now().Add(lead).Truncate(time.Second).Add(time.Second)
	client := asynq.NewClient(opt)
	defer client.Close()
	start := time.Now()
	runKey := "bench_burst@" + slot.UTC().Format(time.RFC3339)
	for i := range n {
		payload, _ := json.Marshal(map[string]string{"recipient": fmt.Sprintf("u%06d", i), "run": runKey})
		if _, err := client.EnqueueContext(ctx, asynq.NewTask("send", payload), asynq.ProcessAt(slot), asynq.MaxRetry(3)); err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
	}
	enqueue := time.Since(start)
	if time.Now().After(slot) {
		return nil, fmt.Errorf("enqueuing %d tasks took %s, past the slot: give a longer --lead", n, enqueue)
	}

	out, err := os.Create(filepath.Join(dir, "outbox.jsonl"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	var mu sync.Mutex
	w := bufio.NewWriter(out)
	sent := make([]time.Time, 0, n)
	all := make(chan struct{})
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: workers, LogLevel: asynq.WarnLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc("send", func(_ context.Context, t *asynq.Task) error {
		var p struct{ Recipient, Run string }
		if err := json.Unmarshal(t.Payload(), &p); err != nil {
			return err
		}
		line, _ := json.Marshal(map[string]any{"key": p.Run + "/" + p.Recipient, "recipient": p.Recipient, "received_at": time.Now()})
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, time.Now())
		_, _ = w.Write(append(line, '\n'))
		if err := w.Flush(); err != nil {
			return err
		}
		if len(sent) == n {
			close(all)
		}
		return nil
	})
	if err := srv.Start(mux); err != nil {
		return nil, err
	}
	defer srv.Shutdown()
	res := &result{Kind: "asynq-burst", Messages: n, Workers: workers, Slot: slot.UTC(), EnqueueMS: ms(enqueue)}
	var redisPeak uint64
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-all:
			break wait
		case <-tick.C:
			redisPeak = max(redisPeak, vmHWM(redisCmd.Process.Pid))
		case <-ctx.Done():
			mu.Lock()
			got := len(sent)
			mu.Unlock()
			return nil, fmt.Errorf("gave up with %d of %d sent: %w", got, n, ctx.Err())
		}
	}
	mu.Lock()
	ds := make([]time.Duration, len(sent))
	for i, t := range sent {
		ds[i] = t.Sub(slot)
	}
	res.Delivered = len(sent)
	if span := sent[len(sent)-1].Sub(sent[0]); span > 0 {
		res.SendsPerSecond = float64(len(sent)-1) / span.Seconds()
	}
	mu.Unlock()
	res.SlotToSend = summarise(ds)
	res.PeakRSSMiB.Redis = float64(max(redisPeak, vmHWM(redisCmd.Process.Pid))) / (1 << 20)
	res.PeakRSSMiB.Bench = float64(vmHWM(os.Getpid())) / (1 << 20)
	return res, nil
}

// startRedis starts an in-memory redis-server (no RDB, no AOF) on a free
// loopback port and waits until it answers.
func startRedis(ctx context.Context, bin, dir string) (string, *exec.Cmd, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", dir, "--protected-mode", "yes")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_, _ = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 7)
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			k, _ := c.Read(buf)
			_ = c.Close()
			if strings.HasPrefix(string(buf[:k]), "+PONG") {
				return addr, cmd, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return "", nil, errors.New("redis-server did not answer within 10s")
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

func summarise(ds []time.Duration) latencies {
	if len(ds) == 0 {
		return latencies{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	pct := func(p float64) time.Duration {
		i := int(float64(len(s))*p/100+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return latencies{N: len(s), First: ms(s[0]), P50: ms(pct(50)), P99: ms(pct(99)), Max: ms(s[len(s)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fmtMS(v float64) string {
	if v >= 10000 || v <= -10000 {
		return fmt.Sprintf("%.2f s", v/1000)
	}
	return fmt.Sprintf("%.1f ms", v)
}

// vmHWM reads a process's peak resident set in bytes; 0 when it cannot.
func vmHWM(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
