package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// The metrics that explain a slow cluster: how long raft takes to commit
// and this node to append to its log, how long snapshots take and how big
// they are, and how much disk the data dir has left.

// Buckets of the Raft latency histograms: a LAN commit is a few ms, a
// busy disk's fsync tens to hundreds.
var (
	raftLatencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	snapshotBuckets    = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
)

// commitSeconds is raft's own commit time (go-metrics key raft.commitTime:
// from a leader dispatching an entry to a quorum holding it). raft reports
// it to go-metrics' process-wide sink only, which cannot say which node
// measured it, so the histogram has no node_id label: in an agent the
// process is one node. Registered in every node's registry.
var commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "herald_raft_commit_seconds",
	Help:    "Time from the leader dispatching a Raft log entry to its commit by a quorum (raft.commitTime; observed on the leader; process-wide).",
	Buckets: raftLatencyBuckets,
})

// installRaftSink routes raft's go-metrics to commitSeconds, once per
// process. go-metrics' own Prometheus sink would export every raft key
// (camelCase names, summaries, per-peer series); Herald wants one
// histogram with a stable name, so this sink keeps only that key. The
// hostname, service prefix and runtime sampler (a goroutine) are off.
var installRaftSink = sync.OnceFunc(func() {
	conf := gometrics.DefaultConfig("")
	conf.EnableHostname, conf.EnableHostnameLabel, conf.EnableRuntimeMetrics = false, false, false
	_, _ = gometrics.NewGlobal(conf, raftSink{}) // errors only for a bad filter config
})

// raftSink is a go-metrics sink that observes raft.commitTime and drops
// every other key.
type raftSink struct{}

var _ gometrics.MetricSink = raftSink{}

func (raftSink) AddSample(key []string, val float32) { raftSink{}.AddSampleWithLabels(key, val, nil) }

func (raftSink) AddSampleWithLabels(key []string, val float32, _ []gometrics.Label) {
	// Timers arrive in milliseconds (TimerGranularity).
	if slices.Equal(key, []string{"raft", "commitTime"}) {
		commitSeconds.Observe(float64(val) / 1000)
	}
}

func (raftSink) SetGauge([]string, float32)                                 {}
func (raftSink) SetGaugeWithLabels([]string, float32, []gometrics.Label)    {}
func (raftSink) EmitKey([]string, float32)                                  {}
func (raftSink) IncrCounter([]string, float32)                              {}
func (raftSink) IncrCounterWithLabels([]string, float32, []gometrics.Label) {}

// raftTimings are a node's own latency histograms, observed where the
// node's stores and state machine do the work (so they carry its node_id).
type raftTimings struct {
	append   prometheus.Histogram // one StoreLogs of the log store
	snapshot prometheus.Histogram // one snapshot taken: capture and persist
}

func newRaftTimings(nodeID string) *raftTimings {
	labels := prometheus.Labels{"node_id": nodeID}
	return &raftTimings{
		append: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "herald_raft_append_seconds", ConstLabels: labels, Buckets: raftLatencyBuckets,
			Help: "Time this node took to append a batch of entries to its Raft log on disk (raft.db, fsync included): the leader's own write and a follower's.",
		}),
		snapshot: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "herald_snapshot_duration_seconds", ConstLabels: labels, Buckets: snapshotBuckets,
			Help: "Time this node took to take a snapshot of its state: capture and write to the data dir.",
		}),
	}
}

// observe runs f and records its time in h; a nil receiver only runs f.
func observe(h prometheus.Histogram, f func() error) error {
	if h == nil {
		return f()
	}
	start := time.Now()
	err := f()
	h.Observe(time.Since(start).Seconds())
	return err
}

// lastSnapshot is the newest snapshot in the store (taken here or
// installed from the leader): nil when there is none.
func lastSnapshot(s raft.SnapshotStore) *raft.SnapshotMeta {
	if s == nil {
		return nil
	}
	metas, err := s.List() // newest first
	if err != nil || len(metas) == 0 {
		return nil
	}
	return metas[0]
}

// fileSize is the size of a file, -1 when it cannot be read.
func fileSize(path string) float64 {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return float64(fi.Size())
}

func raftDBPath(dataDir string) string { return filepath.Join(dataDir, "raft.db") }
