package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/heraldtype"
)

type watchBundle struct {
	w        *opsWatch
	now      time.Time
	leader   bool
	peers    []peerRules
	channels []heraldtype.ChannelStatus
	raised   []engine.RaiseAlert
	gauge    prometheus.Gauge
	reports  []cluster.MemberReport
	alerts   map[string]*engine.Alert // what raise and ack made of them
	acked    []string
}

func setupWatch(t *testing.T) *watchBundle {
	t.Helper()
	b := &watchBundle{now: time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC), leader: true,
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "herald_rules_mismatch"}), alerts: map[string]*engine.Alert{}}
	b.w = newOpsWatch(&opsWatch{
		isLeader: func() bool { return b.leader },
		raise: func(_ context.Context, a engine.RaiseAlert) error {
			b.raised = append(b.raised, a)
			id := engine.AlertID(a.Cause)
			b.alerts[id] = &engine.Alert{ID: id, Cause: a.Cause, Kind: a.Kind, Message: a.Message}
			return nil
		},
		reports: func() []cluster.MemberReport { return b.reports },
		alert: func(id string) (*engine.Alert, bool) {
			a, ok := b.alerts[id]
			return a, ok
		},
		ack: func(_ context.Context, id string) error {
			b.acked = append(b.acked, id)
			b.alerts[id].Acked = true
			return nil
		},
		peers:    func(context.Context) []peerRules { return b.peers },
		channels: func() []heraldtype.ChannelStatus { return b.channels },
		now:      func() time.Time { return b.now },
		mismatch: b.gauge,
		log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return b
}

// step advances the fake clock and runs the watch once.
func (b *watchBundle) step(d time.Duration) {
	b.now = b.now.Add(d)
	b.w.runOnce(context.Background())
}

func TestWatchRulesMismatch(t *testing.T) {
	t.Parallel()
	b := setupWatch(t)
	b.peers = []peerRules{{ID: "n1", Hash: "aaaaaaaaaaaaaaaa"}, {ID: "n2", Hash: "aaaaaaaaaaaaaaaa"}, {ID: "n3", Hash: "bbbbbbbbbbbbbbbb"}}
	b.step(0)
	require.Equal(t, 1.0, gaugeValue(t, b.gauge))
	require.Empty(t, b.raised, "a deploy may take a moment")
	b.step(50 * time.Second)
	require.Empty(t, b.raised)
	b.step(10 * time.Second)
	require.Len(t, b.raised, 1)
	require.Equal(t, "rules-mismatch", b.raised[0].Cause)
	require.Contains(t, b.raised[0].Message, "n1, n2 run aaaaaaaaaaaa; n3 run bbbbbbbbbbbb")
	b.step(time.Hour)
	require.Len(t, b.raised, 1, "one alert per divergence")
	b.peers[2].Hash = "aaaaaaaaaaaaaaaa"
	b.step(10 * time.Second)
	require.Equal(t, 0.0, gaugeValue(t, b.gauge))
	b.peers[2].Hash = ""
	b.step(10 * time.Second)
	require.Equal(t, 0.0, gaugeValue(t, b.gauge), "a node that does not answer is not a mismatch")
}

func TestWatchBrokenRuleAndDownChannel(t *testing.T) {
	t.Parallel()
	b := setupWatch(t)
	b.leader = false
	broken := `typo.lua:4: channel "mokc" is not configured (have: mock)`
	b.peers = []peerRules{{ID: "n1", Hash: "h"}, {ID: "n2", Hash: "h", Broken: []string{broken}}}
	b.channels = []heraldtype.ChannelStatus{{Name: "wecom_sales", Plugin: "wecom", Healthy: false, Error: "plugin exited"}, {Name: "mock", Plugin: "mock", Healthy: true}}
	b.step(0)
	require.Empty(t, b.raised, "followers raise nothing")
	b.leader = true
	b.step(10 * time.Second)
	require.Len(t, b.raised, 1, "a broken rule file at once")
	require.Equal(t, "rule-broken:typo.lua", b.raised[0].Cause)
	require.Equal(t, `rule file typo.lua is broken on n2: `+broken+`; its last good version stays in force`, b.raised[0].Message)
	b.step(40 * time.Second)
	require.Len(t, b.raised, 1, "the channel may be restarting")
	b.step(10 * time.Second)
	require.Len(t, b.raised, 2, "unhealthy for a minute")
	require.Equal(t, "channel-down:wecom_sales", b.raised[1].Cause)
	require.Contains(t, b.raised[1].Message, "channel wecom_sales (plugin wecom) has been unhealthy since 2026-12-01T01:00:00Z: plugin exited")
	b.step(time.Minute)
	require.Len(t, b.raised, 2, "once")

	// Fixed, then broken again: alerted again.
	b.peers[1].Broken = nil
	b.channels[0].Healthy = true
	b.step(10 * time.Second)
	b.peers[1].Broken = []string{broken}
	b.step(10 * time.Second)
	require.Len(t, b.raised, 3)
}

// TestWrongChannelAlertsWithinAMinute: a node whose rules directory holds a
// rule with a channel typo marks it broken (status, herald_rule_errors)
// and raises an alert within a minute — not at the deadline.
func TestWrongChannelAlertsWithinAMinute(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rulesDir := filepath.Join(dir, "rules")
	require.NoError(t, os.MkdirAll(rulesDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(rulesDir, "typo.lua"), []byte(strings.Replace(tickRule, `channel  = "mock"`, `channel  = "mokc"`, 1)), 0o644))
	require.Contains(t, strings.Replace(tickRule, `channel  = "mock"`, `channel  = "mokc"`, 1), "mokc", "the typo is in the rule")
	httpAddr := freeAddr(t)
	cfg := nodeConfig{NodeID: "n1", DataDir: filepath.Join(dir, "n1"), RaftAddr: freeAddr(t), HTTPAddr: httpAddr, Bootstrap: true,
		Rules: rulesDir, Channels: map[string]map[string]any{"mock": {"plugin": "mock", "outbox": filepath.Join(dir, "outbox.jsonl")}},
		devTimeouts: true, raftLogLevel: "error"}
	start := time.Now()
	n, err := startNode(context.Background(), cfg, newLogger("error", ""))
	require.NoError(t, err)
	t.Cleanup(n.stop)

	var st api.RuleStatus
	for _, r := range n.status().Rules {
		if r.File == "typo.lua" {
			st = r
		}
	}
	require.Contains(t, st.Error, `typo.lua:`)
	require.Contains(t, st.Error, `channel "mokc" is not configured (have: mock)`)
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, err)
	require.Contains(t, string(body), `herald_rule_errors{file="typo.lua"} 1`)

	took := eventually(t, time.Minute, "the rule-broken alert", func() bool {
		_, ok := n.fsm.Alert(engine.AlertID("rule-broken:typo.lua"))
		return ok
	})
	al, _ := n.fsm.Alert(engine.AlertID("rule-broken:typo.lua"))
	require.Contains(t, al.Message, `channel "mokc" is not configured`)
	t.Logf("alerted %s after the node started (%s after the test began)", took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(g))
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 1)
	return families[0].GetMetric()[0].GetGauge().GetValue()
}

// With tokens, the ops watch asks the other members for their rule sets
// with the node's own token, as status does: without it every member
// answered 401, so rule sets that differ or files broken on a follower
// were never alerted.
func TestWatchAsksPeersWithTheNodesToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := []api.Token{{Name: "ops", Role: api.RoleAdmin, Secret: "watch-test-admin-token"}}
	start := func(id string, bootstrap bool, join string) *node {
		cfg := nodeConfig{NodeID: id, DataDir: filepath.Join(dir, id), RaftAddr: freeAddr(t), HTTPAddr: freeAddr(t),
			Bootstrap: bootstrap, Join: join, Rules: filepath.Join(dir, "rules"), devTimeouts: true, raftLogLevel: "error",
			apiTokens: tokens}
		n, err := startNode(context.Background(), cfg, newLogger("error", ""))
		require.NoError(t, err)
		t.Cleanup(n.stop)
		return n
	}
	n1 := start("n1", true, "")
	n2 := start("n2", false, n1.cfg.HTTPAddr)
	eventually(t, 30*time.Second, "n1 asks n2 for its rule set", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), watchPeersTimeout)
		defer cancel()
		for _, p := range n1.peerRules(ctx, n1.raft.Status().Members) {
			if p.ID == n2.cfg.NodeID {
				return p.Hash != ""
			}
		}
		return false
	})
}
