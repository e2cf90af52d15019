package cluster

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are gauges computed at scrape time from raft, so they cost
// nothing between scrapes and need no goroutine.
type metrics struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector
}

// raftStateValue encodes raft's state for the herald_raft_state gauge.
func raftStateValue(s raft.RaftState) float64 {
	switch s {
	case raft.Follower:
		return 0
	case raft.Candidate:
		return 1
	case raft.Leader:
		return 2
	}
	return 3 // shutdown
}

func newMetrics(n *Node, f *fsm, reg prometheus.Registerer) *metrics {
	m := &metrics{reg: reg}
	if reg == nil {
		return m
	}
	labels := prometheus.Labels{"node_id": n.cfg.NodeID}
	gauge := func(name, help string, f func() float64) {
		m.collectors = append(m.collectors, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: name, Help: help, ConstLabels: labels,
		}, f))
	}
	gauge("herald_raft_state", "Raft state: 0 follower, 1 candidate, 2 leader, 3 shutdown.",
		func() float64 { return raftStateValue(n.raft.State()) })
	gauge("herald_raft_term", "Current Raft term.",
		func() float64 { return float64(n.raft.CurrentTerm()) })
	gauge("herald_raft_applied_index", "Last Raft log index applied to the state machine.",
		func() float64 { return float64(n.raft.AppliedIndex()) })
	gauge("herald_raft_last_contact_seconds", "Seconds since this node last heard from the leader (0 on the leader, -1 never).",
		func() float64 {
			if n.raft.State() == raft.Leader {
				return 0
			}
			last := n.raft.LastContact()
			if last.IsZero() {
				return -1
			}
			return time.Since(last).Seconds()
		})
	gauge("herald_raft_data_dir_free_bytes", "Bytes left to this node in its data dir's file system (-1 when it cannot be read).",
		func() float64 {
			free, err := freeBytes(n.cfg.DataDir)
			if err != nil {
				return -1
			}
			return float64(free)
		})
	gauge("herald_raft_db_size_bytes", "Size of this node's Raft log and stable store file (raft.db; -1 when it cannot be read). bbolt reuses freed pages but never shrinks the file: herald cluster compact does.",
		func() float64 { return fileSize(raftDBPath(n.cfg.DataDir)) })
	gauge("herald_snapshot_size_bytes", "Size of the newest snapshot in this node's data dir (taken here or installed from the leader; 0 when there is none).",
		func() float64 {
			if m := lastSnapshot(n.snaps); m != nil {
				return float64(m.Size)
			}
			return 0
		})
	gauge("herald_snapshot_last_index", "Raft log index of the newest snapshot in this node's data dir (0 when there is none).",
		func() float64 {
			if m := lastSnapshot(n.snaps); m != nil {
				return float64(m.Index)
			}
			return 0
		})
	gauge("herald_leader_clock_offset_seconds", "The leader's clock minus this node's, as the time it stamps into commands shows (0 on the leader and until a stamp is seen); beyond max_clock_skew one of the two clocks is off.",
		func() float64 { return n.LeaderClockOffset().Seconds() })
	counter := func(name, help string, f func() float64) {
		m.collectors = append(m.collectors, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: name, Help: help, ConstLabels: labels,
		}, f))
	}
	counter("herald_raft_applied_bytes_total", "Bytes of commands applied to the state machine since this node started.",
		func() float64 { return float64(f.appliedBytes.Load()) })
	counter("herald_raft_applied_entries_total", "Commands applied to the state machine since this node started.",
		func() float64 { return float64(f.appliedEntries.Load()) })
	counter("herald_raft_log_write_failures_total", "Writes to the Raft log and stable store that failed since this node started (a full or failing disk).",
		func() float64 { return float64(n.stores.log.failures.Load()) })
	counter("herald_raft_snapshot_write_failures_total", "Snapshots this node failed to write since it started.",
		func() float64 { return float64(n.stores.snapshot.failures.Load()) })
	m.collectors = append(m.collectors, n.timings.append, n.timings.snapshot, n.refused.counter)
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			n.log.Warn("cannot register raft metrics", "err", err)
			m.collectors = m.collectors[:i]
			break
		}
	}
	// Process-wide (see commitSeconds): nodes sharing a registry share it.
	if err := reg.Register(commitSeconds); err == nil {
		m.collectors = append(m.collectors, commitSeconds)
	} else if !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		n.log.Warn("cannot register raft metrics", "err", err)
	}
	return m
}

func (m *metrics) unregister() {
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}
