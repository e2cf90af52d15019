package cluster

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

func TestBootstrapOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := newTestNode(t, nodeOpts{id: "solo", dir: dir, bootstrap: true})
	require.Equal(t, startBootstrap, first.node.startMode)
	leaderOf(t, []*testNode{first})
	_, err := first.node.Apply(ctxT(t), setCmd("a", "1"))
	require.NoError(t, err)
	first.stop()

	// Same data dir, still asked to bootstrap: it must resume instead.
	again := newTestNode(t, nodeOpts{id: "solo", dir: dir, raftAddr: first.raftAddr, bootstrap: true})
	require.Equal(t, startExisting, again.node.startMode)
	leaderOf(t, []*testNode{again})
	waitValue(t, []*testNode{again}, "a", "1")
	require.Equal(t, map[string]string{"solo": first.raftAddr}, servers(t, again.node))
}

func TestThreeNodeReplicationAndForwarding(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	followers := followersOf(nodes, leader)
	ctx := ctxT(t)

	t.Run("apply on the leader replicates to all", func(t *testing.T) {
		resp := apply(t, nodes, setCmd("k", "v"))
		require.IsType(t, uint64(0), resp, "the state machine's response comes back")
		waitValue(t, nodes, "k", "v")
	})

	t.Run("an error response is returned as the error", func(t *testing.T) {
		cmd, err := encodeTest(cmdFail, struct{}{})
		require.NoError(t, err)
		_, err = leader.node.Apply(ctx, cmd)
		require.ErrorIs(t, err, errRefused)
	})

	t.Run("apply on a follower fails with ErrNotLeader", func(t *testing.T) {
		_, err := followers[0].node.Apply(ctx, setCmd("x", "y"))
		require.ErrorIs(t, err, engine.ErrNotLeader)
		require.ErrorIs(t, followers[0].node.VerifyLeader(ctx), engine.ErrNotLeader)
		require.NoError(t, leader.node.VerifyLeader(ctx))
	})

	t.Run("a follower forwards writes and serves reads", func(t *testing.T) {
		code, body := postKV(t, followers[1].httpAddr(), "fw", "1")
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, leader.id, body, "the leader answered the forwarded POST")
		waitValue(t, nodes, "fw", "1")

		resp, err := http.Get("http://" + followers[1].httpAddr() + "/whoami")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, followers[1].id, readBody(t, resp), "a GET is served locally")
		require.Equal(t, leader.httpAddr(), followers[1].node.LeaderHTTPAddr())
	})

	t.Run("a forwarded write is not forwarded twice", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, "http://"+followers[0].httpAddr()+"/kv?key=loop&value=1", nil)
		require.NoError(t, err)
		req.Header.Set(HopHeader, "elsewhere")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Contains(t, readBody(t, resp), "already forwarded")
	})

	t.Run("status from any node", func(t *testing.T) {
		st, err := followers[0].client().Status(ctx)
		require.NoError(t, err)
		require.Equal(t, followers[0].id, st.NodeID)
		require.Equal(t, "follower", st.State)
		require.Equal(t, leader.id, st.LeaderID)
		require.NotZero(t, st.Term)
		require.NotZero(t, st.AppliedIndex)
		require.Len(t, st.Members, 3)
		for _, m := range st.Members {
			require.True(t, m.Voter)
			require.Equal(t, m.ID == leader.id, m.Leader)
			require.NotEmpty(t, m.HTTPAddr, m.ID)
		}
	})

	t.Run("joining again at the same address is a no-op", func(t *testing.T) {
		before := leader.node.raft.LastIndex()
		f := followers[0]
		err := followers[1].client().Join(ctx, JoinRequest{ID: f.id, RaftAddr: f.raftAddr, HTTPAddr: f.httpAddr()})
		require.NoError(t, err)
		require.Equal(t, before, leader.node.raft.LastIndex(), "no log entry for a no-op join")
	})

	t.Run("bad join requests get 400 with a reason", func(t *testing.T) {
		err := followers[0].client().Join(ctx, JoinRequest{ID: "", RaftAddr: "127.0.0.1:1", HTTPAddr: "x:1"})
		var ae *APIError
		require.ErrorAs(t, err, &ae)
		require.Equal(t, http.StatusBadRequest, ae.Status)
		require.Contains(t, ae.Message, "id is empty")

		err = leader.client().Join(ctx, JoinRequest{ID: "n9", RaftAddr: "nowhere", HTTPAddr: "x:1"})
		require.ErrorAs(t, err, &ae)
		require.Equal(t, http.StatusBadRequest, ae.Status)
		require.Contains(t, ae.Message, "raft_addr")

		resp, err := http.Post("http://"+leader.httpAddr()+"/v1/cluster/join", "application/json", strings.NewReader("{"))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.Contains(t, readBody(t, resp), `"error"`)
	})

	t.Run("removing an unknown member is 404", func(t *testing.T) {
		err := followers[0].client().Remove(ctx, "ghost")
		var ae *APIError
		require.ErrorAs(t, err, &ae)
		require.Equal(t, http.StatusNotFound, ae.Status)
	})
}

func TestFailoverMovesLeaderWork(t *testing.T) {
	t.Parallel()
	events := make(chan leadEvent, 64)
	nodes := newCluster(t, 3, events, nil)
	old := leaderOf(t, nodes)
	requireEvent(t, events, leadEvent{node: old.id, started: true})

	old.stop()
	requireEvent(t, events, leadEvent{node: old.id, started: false})

	rest := followersOf(nodes, old)
	var ev leadEvent
	select {
	case ev = <-events:
	case <-time.After(waitTimeout):
		t.Fatal("no new leader started its work")
	}
	require.True(t, ev.started)
	require.NotEqual(t, old.id, ev.node)
	newLeader := leaderOf(t, rest)
	require.Equal(t, newLeader.id, ev.node)

	apply(t, rest, setCmd("after", "failover"))
	waitValue(t, rest, "after", "failover")
}

// requireEvent waits for want, skipping nothing: events arrive in order.
func requireEvent(t *testing.T, events <-chan leadEvent, want leadEvent) {
	t.Helper()
	select {
	case got := <-events:
		require.Equal(t, want, got)
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %+v", want)
	}
}

func TestRestartedNodeRejoinsWithItsData(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	apply(t, nodes, setCmd("before", "1"))
	waitValue(t, nodes, "before", "1")

	f := followersOf(nodes, leader)[0]
	f.stop()
	apply(t, followersOf(nodes, f), setCmd("while-down", "2"))

	// Same id, dir and raft address; a new HTTP address; no join flag.
	back := newTestNode(t, nodeOpts{id: f.id, dir: f.dir, raftAddr: f.raftAddr})
	require.Equal(t, startExisting, back.node.startMode)
	live := []*testNode{nodes[0], nodes[1], nodes[2]}
	for i, tn := range live {
		if tn == f {
			live[i] = back
		}
	}
	waitValue(t, []*testNode{back}, "before", "1")
	waitValue(t, []*testNode{back}, "while-down", "2")
	// It refreshed its member record with the new HTTP address.
	waitConverged(t, live)
}

func TestSameIDAtNewAddressReplacesStaleEntry(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	apply(t, nodes, setCmd("old", "1"))

	stale := followersOf(nodes, leader)[0]
	stale.stop()
	// The machine was rebuilt: fresh data dir, new addresses, same id.
	fresh := newTestNode(t, nodeOpts{id: stale.id, join: leader.httpAddr()})
	require.NotEqual(t, stale.raftAddr, fresh.raftAddr)

	require.Eventually(t, func() bool {
		s := servers(t, leader.node)
		return len(s) == 3 && s[stale.id] == fresh.raftAddr
	}, waitTimeout, 10*time.Millisecond, "the stale address was not replaced")

	apply(t, []*testNode{nodes[0], nodes[1], nodes[2], fresh}, setCmd("new", "2"))
	waitValue(t, []*testNode{fresh}, "old", "1")
	waitValue(t, []*testNode{fresh}, "new", "2")
	require.Eventually(t, func() bool {
		return leader.sm.member(stale.id).HTTPAddr == fresh.httpAddr()
	}, waitTimeout, 10*time.Millisecond)
}

func TestLeaveAndRemove(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	ctx := ctxT(t)

	// A follower leaves.
	f := followersOf(nodes, leader)[0]
	require.NoError(t, f.client().Leave(ctx))
	require.Eventually(t, func() bool {
		_, in := servers(t, leader.node)[f.id]
		return !in && leader.sm.member(f.id).ID == ""
	}, waitTimeout, 10*time.Millisecond)
	f.stop()

	// The leader leaves: it hands leadership over first.
	rest := followersOf(nodes, f)
	require.NoError(t, leader.client().Leave(ctx))
	other := followersOf(rest, leader)[0]
	require.Eventually(t, func() bool {
		s := servers(t, other.node)
		_, in := s[leader.id]
		return other.node.IsLeader() && !in && other.sm.member(leader.id).ID == ""
	}, waitTimeout, 10*time.Millisecond)

	// The last voter cannot leave.
	err := other.client().Leave(ctx)
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusConflict, ae.Status)
}

func TestRemoveOtherMember(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	fs := followersOf(nodes, leader)
	ctx := ctxT(t)
	fs[1].stop() // a dead node, removed by an operator through another follower
	require.NoError(t, fs[0].client().Remove(ctx, fs[1].id))
	require.Eventually(t, func() bool {
		_, in := servers(t, fs[0].node)[fs[1].id]
		return !in && fs[0].sm.member(fs[1].id).ID == ""
	}, waitTimeout, 10*time.Millisecond)
}

func TestJoinNothingListening(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	_, err := tryTestNode(t, nodeOpts{id: "lonely", join: addr, modify: func(c *Config) {
		c.JoinTimeout = 300 * time.Millisecond
	}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "cannot join via "+addr)
	require.Contains(t, err.Error(), "no Herald node at "+addr+": connection refused")
}

func TestRaftAddrInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	_, err = New(Config{NodeID: "a", DataDir: t.TempDir(), RaftAddr: ln.Addr().String(), Logger: testLogger()}, newTestSM())
	require.ErrorIs(t, err, ErrAddrInUse)
	require.EqualError(t, err, "raft address "+ln.Addr().String()+" is in use")
}

func TestDataDirInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	newTestNode(t, nodeOpts{id: "a", dir: dir, noStart: true})
	_, err := tryTestNode(t, nodeOpts{id: "a", dir: dir, noStart: true})
	require.ErrorIs(t, err, ErrDataDirInUse)
}

func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	base := Config{NodeID: "a", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:7101"}
	for name, mod := range map[string]func(*Config){
		"no id":          func(c *Config) { c.NodeID = "" },
		"no dir":         func(c *Config) { c.DataDir = "" },
		"no raft addr":   func(c *Config) { c.RaftAddr = "" },
		"wildcard":       func(c *Config) { c.RaftAddr = "0.0.0.0:7101" },
		"port 0":         func(c *Config) { c.RaftAddr = "127.0.0.1:0" },
		"no port":        func(c *Config) { c.RaftAddr = "127.0.0.1" },
		"both":           func(c *Config) { c.Bootstrap, c.Join = true, "127.0.0.1:8101" },
		"raft log level": func(c *Config) { c.RaftLogLevel = "loud" },
		"lease":          func(c *Config) { c.LeaderLeaseTimeout = 2 * time.Second },
	} {
		c := base
		mod(&c)
		_, err := New(c, newTestSM())
		require.ErrorIs(t, err, ErrInvalidConfig, name)
	}
	_, err := New(base, nil)
	require.ErrorIs(t, err, ErrInvalidConfig)
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	tn := newTestNode(t, nodeOpts{id: "m", bootstrap: true, modify: func(c *Config) { c.Registerer = reg }})
	leaderOf(t, []*testNode{tn})
	gather := func() map[string]float64 {
		families, err := reg.Gather()
		require.NoError(t, err)
		got := map[string]float64{}
		for _, f := range families {
			m := f.GetMetric()[0]
			// A histogram's value here is its count.
			got[f.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
		return got
	}
	// The leader's own member record goes through the log.
	require.Eventually(t, func() bool {
		got := gather()
		return got["herald_raft_applied_bytes_total"] > 0 && got["herald_raft_applied_entries_total"] > 0
	}, 10*time.Second, 10*time.Millisecond)
	got := gather()
	require.Equal(t, 2.0, got["herald_raft_state"])
	require.Positive(t, got["herald_raft_term"])
	require.Contains(t, got, "herald_raft_applied_index")
	require.Contains(t, got, "herald_raft_last_contact_seconds")
	require.Contains(t, got, "herald_leader_clock_offset_seconds")
	require.Positive(t, got["herald_raft_data_dir_free_bytes"])
	require.Contains(t, got, "herald_raft_log_write_failures_total")
	require.Contains(t, got, "herald_raft_snapshot_write_failures_total")
	// The metrics that explain a slow cluster: the leader's commits and
	// appends are timed, raft.db has a size; no snapshot yet.
	require.Positive(t, got["herald_raft_commit_seconds"], "raft.commitTime reaches the histogram through the go-metrics sink")
	require.Positive(t, got["herald_raft_append_seconds"])
	require.Positive(t, got["herald_raft_db_size_bytes"])
	require.Zero(t, got["herald_snapshot_size_bytes"])
	require.Zero(t, got["herald_snapshot_last_index"])
	require.Zero(t, got["herald_snapshot_duration_seconds"])
	require.NoError(t, tn.node.raft.Snapshot().Error())
	got = gather()
	require.Equal(t, 1.0, got["herald_snapshot_duration_seconds"], "one snapshot taken, one observed")
	require.Positive(t, got["herald_snapshot_size_bytes"])
	require.Positive(t, got["herald_snapshot_last_index"])
	require.LessOrEqual(t, got["herald_snapshot_last_index"], float64(tn.node.raft.AppliedIndex()))
	// What promtool check metrics checks (it runs promlint).
	families, err := reg.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(families).Lint()
	require.NoError(t, err)
	require.Empty(t, problems)
	tn.stop()
	families, err = reg.Gather()
	require.NoError(t, err)
	require.Empty(t, families, "Shutdown unregisters the gauges")
}

func TestApplyHonoursContext(t *testing.T) {
	t.Parallel()
	tn := newTestNode(t, nodeOpts{id: "c", bootstrap: true})
	leaderOf(t, []*testNode{tn})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tn.node.Apply(ctx, setCmd("a", "b"))
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, tn.sm.get("a"), "a cancelled context proposes nothing")
	tn.stop()
	_, err = tn.node.Apply(context.Background(), setCmd("a", "b"))
	require.ErrorIs(t, err, engine.ErrNotLeader)
	require.ErrorIs(t, err, ErrShutdown)
	err = tn.node.VerifyLeader(context.Background())
	require.ErrorIs(t, err, engine.ErrNotLeader)
	require.ErrorIs(t, err, ErrShutdown)
	require.NoError(t, tn.node.Shutdown(), "Shutdown is idempotent")
	require.FileExists(t, filepath.Join(tn.dir, "raft.db"))
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

func TestRestartAtNewRaftAddressWithJoin(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	f := followersOf(nodes, leader)[0]
	f.stop()
	apply(t, followersOf(nodes, f), setCmd("moved", "1"))

	// Same dir (existing state), new raft and HTTP addresses, --join given.
	moved := newTestNode(t, nodeOpts{id: f.id, dir: f.dir, join: leader.httpAddr()})
	require.Equal(t, startExisting, moved.node.startMode, "existing state: no join in Start")
	require.Eventually(t, func() bool {
		return servers(t, leader.node)[f.id] == moved.raftAddr
	}, waitTimeout, 10*time.Millisecond, "the leader did not learn the new raft address")
	waitValue(t, []*testNode{moved}, "moved", "1")
	require.Eventually(t, func() bool {
		return leader.sm.member(f.id).HTTPAddr == moved.httpAddr()
	}, waitTimeout, 10*time.Millisecond)
}

// A node started with neither bootstrap nor join waits; until it is added
// it has no leader to forward to. Then an operator adds it by address.
func TestWaitingNodeIsAddedByAddress(t *testing.T) {
	t.Parallel()
	leader := newTestNode(t, nodeOpts{id: "n1", bootstrap: true})
	w := newTestNode(t, nodeOpts{id: "n2"})
	require.Equal(t, startWait, w.node.startMode)

	code, body := postKV(t, w.httpAddr(), "early", "1")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "no leader elected")

	ctx := ctxT(t)
	st, err := w.client().Status(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Members)
	require.Equal(t, w.raftAddr, st.RaftAddr, "status tells an operator what to join")
	waitConverged(t, []*testNode{leader}) // the leader recorded its own member
	require.NoError(t, leader.client().Join(ctx, JoinRequest{ID: st.NodeID, RaftAddr: st.RaftAddr, HTTPAddr: st.HTTPAddr}))
	waitConverged(t, []*testNode{leader, w})

	code, body = postKV(t, w.httpAddr(), "late", "1")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "n1", body)
	waitValue(t, []*testNode{leader, w}, "late", "1")
}

// Two nodes in one process may share a Registerer: their gauges differ by
// node_id, and one node's Shutdown unregisters only its own.
func TestMetricsSharedRegisterer(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	withReg := func(c *Config) { c.Registerer = reg }
	a := newTestNode(t, nodeOpts{id: "a", bootstrap: true, modify: withReg})
	b := newTestNode(t, nodeOpts{id: "b", noStart: true, modify: withReg})
	count := func() map[string]int {
		families, err := reg.Gather()
		require.NoError(t, err)
		out := map[string]int{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				// herald_raft_commit_seconds is process-wide (no node_id):
				// the nodes share it, and it outlives neither.
				for _, l := range m.GetLabel() {
					if l.GetName() == "node_id" {
						out[l.GetValue()]++
					}
				}
			}
		}
		return out
	}
	require.Equal(t, map[string]int{"a": 15, "b": 15}, count())
	b.stop()
	require.Equal(t, map[string]int{"a": 15}, count())
	a.stop()
	require.Empty(t, count())
}

// A first start that crashed before bootstrapping left a raft.db without
// state: the next start bootstraps (exactly once, still).
func TestHalfInitialisedDataDirBootstraps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	crashed := newTestNode(t, nodeOpts{id: "h", dir: dir, bootstrap: true, noStart: true})
	crashed.stop()
	require.FileExists(t, filepath.Join(dir, "raft.db"))

	again := newTestNode(t, nodeOpts{id: "h", dir: dir, raftAddr: crashed.raftAddr, bootstrap: true})
	require.Equal(t, startBootstrap, again.node.startMode)
	apply(t, []*testNode{again}, setCmd("a", "1"))
	again.stop()

	third := newTestNode(t, nodeOpts{id: "h", dir: dir, raftAddr: crashed.raftAddr, bootstrap: true})
	require.Equal(t, startExisting, third.node.startMode)
	waitValue(t, []*testNode{third}, "a", "1")
}
