package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// outboxRec is what the bench reads of one mock outbox line: when the
// channel received the message, its key, and the run it belongs to (the
// bench's rules put run.key into every message's content).
type outboxRec struct {
	Key        string    `json:"key"`
	ReceivedAt time.Time `json:"received_at"`
	Duplicate  bool      `json:"duplicate"`
	Payload    struct {
		Content string `json:"content"`
	} `json:"payload"`
}

// outboxTail reads a growing outbox incrementally: each poll parses only
// the complete lines appended since the last one, so watching 100,000
// messages costs the machine under test as little as possible.
type outboxTail struct {
	path    string
	off     int64
	partial []byte
	recs    []outboxRec
}

// poll reads what was appended since the last poll and returns the new
// records. A missing file is an empty outbox.
func (t *outboxTail) poll() ([]outboxRec, error) {
	f, err := os.Open(t.path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	t.off += int64(len(data))
	data = append(t.partial, data...)
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		t.partial = data
		return nil, nil
	}
	t.partial = append([]byte(nil), data[end+1:]...)
	first := len(t.recs)
	for line := range bytes.SplitSeq(data[:end], []byte{'\n'}) {
		var r outboxRec
		if json.Unmarshal(line, &r) != nil || r.Key == "" {
			continue // a torn or foreign line
		}
		t.recs = append(t.recs, r)
	}
	return t.recs[first:], nil
}

// runSlot returns the slot of a scheduled run key (rule@RFC3339).
func runSlot(key string) (time.Time, bool) {
	_, at, ok := strings.Cut(key, "@")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, at)
	return t, err == nil
}

// latencies summarises durations: nearest-rank percentiles, in ms.
type latencies struct {
	N     int     `json:"n"`
	First float64 `json:"first_ms"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

func summarise(ds []time.Duration) latencies {
	if len(ds) == 0 {
		return latencies{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return latencies{N: len(s), First: ms(s[0]), P50: ms(percentile(s, 50)), P99: ms(percentile(s, 99)), Max: ms(s[len(s)-1])}
}

// percentile is the nearest-rank percentile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// scrapeMetric sums the values of a Prometheus metric (every series whose
// labels contain each of the given label="value" pairs) on one node.
func scrapeMetric(ctx context.Context, addr, name string, labels ...string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := benchHTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s/metrics: %s", addr, resp.Status)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || len(line) == len(name) || (line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok || !hasLabels(series, labels) {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			continue
		}
		sum += v
	}
	return sum, sc.Err()
}

func hasLabels(series string, labels []string) bool {
	for _, l := range labels {
		if !strings.Contains(series, l) {
			return false
		}
	}
	return true
}

// sumMetric adds a metric up over several nodes; nodes that do not answer
// count nothing (a killed node).
func sumMetric(ctx context.Context, addrs []string, name string, labels ...string) float64 {
	var sum float64
	for _, a := range addrs {
		if v, err := scrapeMetric(ctx, a, name, labels...); err == nil {
			sum += v
		}
	}
	return sum
}

// writeFileAtomic writes data to path through a rename, so that the rule
// watcher never reads half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// profiler captures CPU profiles of the leader and of one follower over a
// window (in the background) and, at the end, their allocation profiles:
// for `herald bench burst --profile DIR`. The follower's matter as much as
// the leader's: on a small machine the three nodes share the cores, and
// every entry is decoded and applied on each of them.
type profiler struct {
	dir   string
	addrs map[string]string // file prefix ("", "follower-") → pprof address
	done  chan error
}

// startProfile starts a CPU profile of seconds on the leader (pprof at
// leader, written to dir/cpu.pprof) and, when follower is not "", on that
// follower (dir/follower-cpu.pprof).
func startProfile(ctx context.Context, dir, leader, follower string, seconds int) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := &profiler{dir: dir, addrs: map[string]string{"": leader}, done: make(chan error, 2)}
	if follower != "" {
		p.addrs["follower-"] = follower
	}
	for prefix, addr := range p.addrs {
		go func() {
			p.done <- fetchTo(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds), filepath.Join(dir, prefix+"cpu.pprof"), time.Duration(seconds+30)*time.Second)
		}()
	}
	return p, nil
}

// finish waits for the CPU profiles and fetches the allocation profiles
// (everything allocated since each node started).
func (p *profiler) finish(ctx context.Context) error {
	for range p.addrs {
		if err := <-p.done; err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
	}
	for prefix, addr := range p.addrs {
		if err := fetchTo(ctx, "http://"+addr+"/debug/pprof/allocs", filepath.Join(p.dir, prefix+"allocs.pprof"), time.Minute); err != nil {
			return err
		}
	}
	return nil
}

func fetchTo(ctx context.Context, url, path string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
