package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/calendar"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

// Three whole nodes in one process — the engine's state machine and leader
// loops, Raft, the Lua rules and the mock plugin — as `herald dev` runs them.
// Stopping the leader hands the work to another node, and no slot reaches a
// person twice.
func TestInProcessThreeNodes(t *testing.T) {
	c := startInProcess(t)

	c.stop(c.leader())
	eventually(t, 10*time.Second, "a new leader", func() bool { return c.leader() != nil })
	before := c.slotsDelivered()
	eventually(t, 30*time.Second, "the new leader sends", func() bool { return c.slotsDelivered() >= before+2 })

	// Every node that is still up holds the same runs: the state is replicated.
	l := c.leader()
	eventually(t, 10*time.Second, "followers caught up", func() bool {
		for _, n := range c.running() {
			if n.fsm.AppliedIndex() < l.fsm.AppliedIndex() {
				return false
			}
		}
		return true
	})
	sent := func(n *node) int {
		return len(n.fsm.Deliveries(func(d *engine.Delivery) bool { return d.State == engine.StateSent }))
	}
	for _, n := range c.running() {
		require.GreaterOrEqual(t, sent(n), 4, "node %s", n.cfg.NodeID)
	}
	got, raw := c.requireEachSlotOnce()
	t.Logf("%d slots to each of %d people, %d raw receipts", len(got["alice"]), len(got), raw)
}

func TestCalendarWarnings(t *testing.T) {
	t.Parallel()
	_, last := calendar.HolidayDataRange()
	uses := []engine.Rule{{Name: "daily", Calendar: calendar.CNWorkday}}
	require.Empty(t, calendarWarnings(uses, time.Date(last, 10, 1, 0, 0, 0, 0, time.UTC)))
	require.Len(t, calendarWarnings(uses, time.Date(last, 11, 15, 0, 0, 0, 0, time.UTC)), 1)
	require.Empty(t, calendarWarnings([]engine.Rule{{Name: "weekly", Calendar: "weekday"}}, time.Date(last+1, 1, 1, 0, 0, 0, 0, time.UTC)))
}

// A node listening on every interface (http_addr 0.0.0.0:PORT) records the
// address the others can dial: its Raft host with its HTTP port. It
// recorded 0.0.0.0:PORT, which each member dialled as its own machine: a
// follower forwarded writes to itself (503), and the leader read its own
// status for the member's build.
func TestWildcardHTTPAddrAdvertisesTheRaftHost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := func(id string, bootstrap bool, join string) (*node, string) {
		httpAddr := freeAddr(t)
		_, port, err := net.SplitHostPort(httpAddr)
		require.NoError(t, err)
		raftAddr := freeAddr(t)
		cfg := nodeConfig{NodeID: id, DataDir: filepath.Join(dir, id), RaftAddr: raftAddr, HTTPAddr: "0.0.0.0:" + port,
			Bootstrap: bootstrap, Join: join, Rules: filepath.Join(dir, "rules"), devTimeouts: true, raftLogLevel: "error"}
		n, err := startNode(context.Background(), cfg, newLogger("error", ""))
		require.NoError(t, err)
		t.Cleanup(n.stop)
		return n, "127.0.0.1:" + port
	}
	_, http1 := start("n1", true, "")
	n2, http2 := start("n2", false, http1)
	want := map[string]string{"n1": http1, "n2": http2}
	eventually(t, 30*time.Second, "both records carry a dialable address", func() bool {
		got := map[string]string{}
		for _, m := range n2.fsm.Members() {
			got[m.ID] = m.HTTPAddr
		}
		return maps.Equal(got, want)
	})
	require.Equal(t, http1, n2.raft.LeaderHTTPAddr())
}

// blastRule sends one WeCom text message to every person in the directory
// each time an API task fires it.
const blastRule = `return rule {
  name = "blast", channel = "wecom", timezone = "Asia/Shanghai",
  recipients = function(run) return people.all() end,
  message = function(run, to) return { msgtype = "text", content = run.key .. " " .. to.userid } end,
}
`

// BenchmarkExecutorToWecom measures messages per second from the executor,
// through Raft claims and results, the host and the wecom plugin process,
// to the fake WeCom server on loopback: a one-node cluster, no rate limits
// that bind (one message per person, a channel limit far above the rate).
func BenchmarkExecutorToWecom(b *testing.B) {
	const people = 2000
	dir := b.TempDir()
	rules := filepath.Join(dir, "rules")
	require.NoError(b, os.MkdirAll(rules, 0o755))
	corp := wecomfake.DemoCorp()
	var csv strings.Builder
	csv.WriteString("userid,name\n")
	for i := range people {
		id := fmt.Sprintf("u%05d", i)
		corp.Members = append(corp.Members, wecomfake.MemberConfig{UserID: id, Departments: []int{1}})
		fmt.Fprintf(&csv, "%s,%s\n", id, id)
	}
	require.NoError(b, os.WriteFile(filepath.Join(rules, "people.csv"), []byte(csv.String()), 0o644))
	require.NoError(b, os.WriteFile(filepath.Join(rules, "blast.lua"), []byte(blastRule), 0o644))

	fake := wecomfake.New(wecomfake.Config{Corps: []wecomfake.CorpConfig{corp}, MemberPerMinute: -1, MemberPerHour: -1})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	srv := &http.Server{Handler: fake.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })

	raftLn, httpLn := freeAddr(b), freeAddr(b)
	n, err := startNode(context.Background(), nodeConfig{
		NodeID: "n1", DataDir: filepath.Join(dir, "n1"), RaftAddr: raftLn, HTTPAddr: httpLn, Bootstrap: true,
		Rules: rules, devTimeouts: true, raftLogLevel: "error",
		Channels: map[string]map[string]any{"wecom": {"plugin": "wecom", "base_url": "http://" + ln.Addr().String(),
			"corp_id": corp.ID, "agent_id": corp.Apps[0].AgentID, "secret": corp.Apps[0].Secret, "calls_per_second": 1_000_000}},
	}, newLogger("error", ""))
	require.NoError(b, err)
	b.Cleanup(n.stop)
	deadline := time.Now().Add(20 * time.Second)
	for !n.raft.IsLeader() {
		require.True(b, time.Now().Before(deadline), "no leader")
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}

	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		key := fmt.Sprintf("blast-%d", i)
		cmd, err := engine.Encode(engine.CmdSubmitTask, engine.SubmitTask{Key: key, Rule: "blast", DueAt: time.Now(), Now: time.Now()})
		require.NoError(b, err)
		_, err = n.raft.Apply(context.Background(), cmd)
		require.NoError(b, err)
		deadline := time.Now().Add(5 * time.Minute)
		for {
			sent := 0
			for _, d := range n.fsm.RunDeliveries(engine.TaskRunKey(key)) {
				if d.State == engine.StateSent {
					sent++
				}
			}
			if sent == people {
				break
			}
			require.True(b, time.Now().Before(deadline), "only %d of %d sent", sent, people)
			time.Sleep(5 * time.Millisecond) // polling with a deadline
		}
	}
	b.ReportMetric(float64(b.N*people)/time.Since(start).Seconds(), "msgs/s")
}

// inProcess is three whole nodes in one process — the engine's state
// machine and leader loops, Raft, the Lua rules and the mock plugin — as
// `herald dev` runs them, on setupE2E's addresses, rules and outbox.
type inProcess struct {
	*e2eCluster
	nodes   []*node
	stopped map[*node]bool
}

// startInProcess starts the three nodes and returns once they are one
// cluster and its rule has delivered two slots.
func startInProcess(t *testing.T) *inProcess {
	return startInProcessWith(t, nil)
}

// startInProcessWith is startInProcess with modify applied to node i's
// config first (nil: none).
func startInProcessWith(t *testing.T, modify func(i int, cfg *nodeConfig)) *inProcess {
	p := &inProcess{e2eCluster: setupE2E(t), stopped: map[*node]bool{}}
	t.Cleanup(func() {
		for _, n := range p.nodes {
			if !p.stopped[n] {
				n.stop()
			}
		}
	})
	log := newLogger("error", "")
	channels := map[string]map[string]any{"mock": {"plugin": "mock", "outbox": p.outbox}}
	for i, a := range p.e2eCluster.nodes {
		cfg := nodeConfig{NodeID: a.id, DataDir: a.data, RaftAddr: a.raft, HTTPAddr: a.http,
			Rules: p.rules, Channels: channels, devTimeouts: true, raftLogLevel: "error"}
		if i == 0 {
			cfg.Bootstrap = true
		} else {
			cfg.Join = p.e2eCluster.nodes[0].http
		}
		if modify != nil {
			modify(i, &cfg)
		}
		n, err := startNode(context.Background(), cfg, log.With("node", a.id))
		require.NoError(t, err)
		p.nodes = append(p.nodes, n)
	}
	eventually(t, 20*time.Second, "three members", func() bool {
		l := p.leader()
		return l != nil && len(l.raft.Status().Members) == 3
	})
	eventually(t, 30*time.Second, "slots delivered", func() bool { return p.slotsDelivered() >= 2 })
	return p
}

// leader is the running node that leads, or nil.
func (p *inProcess) leader() *node {
	for _, n := range p.nodes {
		if !p.stopped[n] && n.raft.IsLeader() {
			return n
		}
	}
	return nil
}

// stop stops node n for good.
func (p *inProcess) stop(n *node) {
	n.stop()
	p.stopped[n] = true
}

// running are the nodes not stopped.
func (p *inProcess) running() []*node {
	var out []*node
	for _, n := range p.nodes {
		if !p.stopped[n] {
			out = append(out, n)
		}
	}
	return out
}

// machineAddr is an address of this machine other than loopback, as a
// member on another machine would see this one; "" when it has none.
func machineAddr(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP.String()
		}
	}
	return ""
}

func freeAddrOn(t *testing.T, host string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// Without tokens, across machines: the leader (n1) serves its API on a
// network address, n2 on loopback only. A write n2 takes from its own
// machine reaches the leader from n2's network address, which is not
// loopback: with the cluster secret, n2 vouches for it, the leader accepts
// it and records it as loopback's, via n2, from 127.0.0.1. A write sent to
// the leader's network address from the same machine is not loopback and
// is refused, as the README says. n2's join is recorded too.
func TestLoopbackWriteVouchedAcrossMachines(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster; skipped with -short")
	}
	ip := machineAddr(t)
	if ip == "" {
		t.Skip("this machine has no address but loopback: nothing to forward across")
	}
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules")
	require.NoError(t, os.MkdirAll(rules, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(rules, "remind.lua"), []byte(remindRule), 0o644))
	channels := map[string]map[string]any{"mock": {"plugin": "mock", "outbox": filepath.Join(dir, "outbox.jsonl")}}
	log := newLogger("error", "")
	start := func(cfg nodeConfig) *node {
		cfg.DataDir, cfg.Rules, cfg.Channels = filepath.Join(dir, cfg.NodeID), rules, channels
		cfg.clusterSecret, cfg.devTimeouts, cfg.raftLogLevel = "a-cluster-secret-for-the-forward-test", true, "error"
		n, err := startNode(context.Background(), cfg, log.With("node", cfg.NodeID))
		require.NoError(t, err)
		t.Cleanup(n.stop)
		return n
	}
	n1 := start(nodeConfig{NodeID: "n1", RaftAddr: freeAddrOn(t, ip), HTTPAddr: freeAddrOn(t, ip), Bootstrap: true})
	eventually(t, 20*time.Second, "n1 leads", n1.raft.IsLeader)
	n2 := start(nodeConfig{NodeID: "n2", RaftAddr: freeAddrOn(t, ip), HTTPAddr: freeAddr(t), Join: n1.cfg.HTTPAddr})
	eventually(t, 20*time.Second, "n2 holds both member records", func() bool { return len(n2.fsm.Members()) == 2 })

	post := func(addr, key string) (int, string) {
		body := `{"key":"` + key + `","rule":"remind","due_at":"` + time.Now().Add(time.Hour).Format(time.RFC3339) + `"}`
		resp, err := http.Post("http://"+addr+"/v1/tasks", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp.StatusCode, b.String()
	}
	code, body := post(n2.cfg.HTTPAddr, "through-n2")
	require.Equal(t, http.StatusCreated, code, body)
	submits := engine.AuditQuery{Limit: 10, Action: "task.submit"}
	eventually(t, 10*time.Second, "the record", func() bool { return len(n1.fsm.Audit(submits).Records) == 1 })
	r := n1.fsm.Audit(submits).Records[0]
	require.Equal(t, []string{"loopback", "admin", "127.0.0.1", "n2", "task.submit", "through-n2", "n1"},
		[]string{r.Actor, r.Role, r.Remote, r.Via, r.Action, r.Target, r.Node})

	code, body = post(n1.cfg.HTTPAddr, "straight")
	require.Equal(t, http.StatusUnauthorized, code, body)
	require.Contains(t, body, "loopback")

	// n2's join is in the trail too: proven by the cluster secret.
	joins := n1.fsm.Audit(engine.AuditQuery{Limit: 10, Action: "cluster.join"}).Records
	require.Len(t, joins, 1)
	require.Equal(t, []string{"peer", "n2"}, []string{joins[0].Actor, joins[0].Target})
}
