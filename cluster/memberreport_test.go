package cluster

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// reportOf is the leader's latest report of id ("" Unknown and nil Report
// when it has none yet).
func reportOf(leader *Node, id string) MemberReport {
	for _, r := range leader.MemberReports() {
		if r.ID == id {
			return r
		}
	}
	return MemberReport{}
}

// A follower that cannot write its log says so in its report, with the
// error, within a poll; the leader's clock offset to it is about zero; and
// once it writes again its report says so.
func TestLeaderSeesAFollowersFailedWrites(t *testing.T) {
	t.Parallel()
	var fault atomic.Pointer[error]
	full := errors.New("write raft.db: no space left on device")
	reg := prometheus.NewRegistry()
	nodes := newCluster(t, 3, nil, func(c *Config) {
		if c.NodeID == "n3" {
			c.WriteFault = func(store string) error {
				if e := fault.Load(); e != nil && store == "log" {
					return *e
				}
				return nil
			}
			c.Registerer = reg
		}
	})
	leader := leaderOf(t, nodes)
	var sick *testNode
	for _, tn := range nodes {
		if tn.id == "n3" {
			sick = tn
		}
	}
	if sick == leader {
		require.NoError(t, leader.node.transferLeadership(ctxT(t)))
		leader = leaderOf(t, followersOf(nodes, sick))
	}

	require.Eventually(t, func() bool {
		r := reportOf(leader.node, "n3").Report
		return r != nil && !r.Log.Failing()
	}, waitTimeout, 10*time.Millisecond, "a healthy report")
	r := reportOf(leader.node, "n3")
	require.Less(t, r.Offset.Abs(), time.Second, "one machine, one clock")
	require.Positive(t, r.RTT)
	require.LessOrEqual(t, r.Offset.Abs(), r.RTT/2+time.Millisecond, "the offset is within half the round trip")
	require.NotZero(t, r.Report.DataDirFreeBytes)

	fault.Store(&full)
	postKV(t, leader.httpAddr(), "k", "v") // an entry n3 must write
	require.Eventually(t, func() bool {
		r := reportOf(leader.node, "n3").Report
		return r != nil && r.Log.Failing() && r.Log.LastError == full.Error() && r.Log.Failures > 0
	}, waitTimeout, 10*time.Millisecond, "the failing follower's report")
	require.Positive(t, metricValue(t, reg, "herald_raft_log_write_failures_total"))
	require.Positive(t, metricValue(t, reg, "herald_raft_data_dir_free_bytes"))

	fault.Store(nil)
	require.Eventually(t, func() bool {
		r := reportOf(leader.node, "n3").Report
		return r != nil && !r.Log.Failing()
	}, waitTimeout, 10*time.Millisecond, "writing again")
	waitValue(t, nodes, "k", "v")
}

// A member on a build without reports (404) shows as unknown; the leader
// goes on. With a secret, an answer that does not prove it is not taken.
func TestReportsFromOlderAndUnprovenMembers(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, func(c *Config) { c.ClusterSecret = "0123456789abcdef0123" })
	leader := leaderOf(t, nodes)
	followers := followersOf(nodes, leader)
	for _, f := range followers {
		require.Eventually(t, func() bool { return reportOf(leader.node, f.id).Report != nil },
			waitTimeout, 10*time.Millisecond, "a proven report from %s", f.id)
	}

	old, plain := followers[0], followers[1]
	wrap := func(tn *testNode, h func(w http.ResponseWriter, r *http.Request, next http.Handler)) {
		next := *tn.handler.h.Load()
		var hh http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r, next) })
		tn.handler.h.Store(&hh)
	}
	wrap(old, func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.URL.Path == reportPath {
			writeError(w, http.StatusNotFound, "no cluster endpoint GET "+reportPath) // as older builds answer
			return
		}
		next.ServeHTTP(w, r)
	})
	wrap(plain, func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		r.Header.Del(PeerNonceHeader) // answered, but without the proof
		next.ServeHTTP(w, r)
	})
	require.Eventually(t, func() bool {
		r := reportOf(leader.node, old.id)
		return r.Report == nil && r.Unknown == "its build has no reports (an older build)"
	}, waitTimeout, 10*time.Millisecond, "the older member is unknown")
	require.Eventually(t, func() bool {
		r := reportOf(leader.node, plain.id)
		return r.Report == nil && strings.Contains(r.Unknown, "did not prove it holds cluster_secret")
	}, waitTimeout, 10*time.Millisecond, "an unproven answer is not taken")
	require.True(t, leader.node.IsLeader())
	_, err := leader.node.Apply(ctxT(t), setCmd("still", "leads"))
	require.NoError(t, err)
}

// metricValue is the value of the one series of metric name in reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			m := f.GetMetric()[0]
			return m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
