package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/engine/enginetest/poll"
)

// The multi-process tests run real `herald agent` processes built from
// this package, kill them with SIGKILL, and restart them.

var heraldBin string // built once by TestMain, unless -short

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	// In-process nodes launch their built-in channel plugins by re-running
	// this binary as `plugin serve NAME`: serve it, as herald would.
	if len(os.Args) >= 3 && os.Args[1] == "plugin" && os.Args[2] == "serve" {
		main()
		return 0
	}
	flag.Parse() // testing.Short needs the flags parsed
	if !testing.Short() && os.Getenv("HERALD_E2E_BIN") == "" {
		dir, err := os.MkdirTemp("", "herald-e2e")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		heraldBin = filepath.Join(dir, "herald")
		out, err := exec.Command("go", "build", "-race", "-o", heraldBin, ".").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build herald: %v\n%s", err, out)
			return 1
		}
	}
	return m.Run()
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// stillFree is addr if it can still be bound, else another free address.
func stillFree(t testing.TB, addr string) string {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return freeAddr(t)
	}
	_ = ln.Close()
	return addr
}

type agentProc struct {
	id, raft, http, data string
	bin                  string // "" is heraldBin, this build
	cmd                  *exec.Cmd
	log                  *os.File
}

type e2eCluster struct {
	t      *testing.T
	dir    string
	rules  string
	config string
	outbox string
	nodes  []*agentProc
}

// tickRule fires every second and sends the slot to two people.
const tickRule = `return rule {
  name     = "tick",
  schedule = "* * * * * *",
  timezone = "Asia/Shanghai",
  channel  = "mock",
  catchup  = "1h",
  recipients = function(run) return { "alice", "bob" } end,
  message = function(run, to) return { msgtype = "text", content = run.slot } end,
}
`

func setupE2E(t *testing.T) *e2eCluster {
	if testing.Short() {
		t.Skip("multi-process test; skipped with -short")
	}
	dir := t.TempDir()
	c := &e2eCluster{t: t, dir: dir, rules: filepath.Join(dir, "rules"), outbox: filepath.Join(dir, "outbox.jsonl"), config: filepath.Join(dir, "herald.yaml")}
	require.NoError(t, os.MkdirAll(c.rules, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(c.rules, "tick.lua"), []byte(tickRule), 0o644))
	require.NoError(t, os.WriteFile(c.config, []byte("channels:\n  mock:\n    plugin: mock\n    outbox: "+c.outbox+"\n"), 0o644))
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		c.nodes = append(c.nodes, &agentProc{id: id, raft: freeAddr(t), http: freeAddr(t), data: filepath.Join(dir, id)})
	}
	t.Cleanup(c.stopAll)
	return c
}

// startTaskCluster runs the remind rule alone (API tasks, no timed rule),
// bootstraps n1, joins n2 and n3 to it with --join, and waits for three
// voters: the start of the recovery tests.
func (c *e2eCluster) startTaskCluster() (n1, n2, n3 *agentProc) {
	c.t.Helper()
	require.NoError(c.t, os.Remove(filepath.Join(c.rules, "tick.lua")))
	require.NoError(c.t, os.WriteFile(filepath.Join(c.rules, "remind.lua"), []byte(upgradeRemind), 0o644))
	n1, n2, n3 = c.nodes[0], c.nodes[1], c.nodes[2]
	c.start(n1, "--bootstrap")
	eventually(c.t, 20*time.Second, "n1 leads", func() bool { return c.leader(n1) == n1 })
	c.start(n2, "--join", n1.http)
	c.start(n3, "--join", n1.http)
	eventually(c.t, 20*time.Second, "three voters", func() bool { return votersAt(n1.http) == "n1 n2 n3" })
	return n1, n2, n3
}

// votersAt lists the voters a node's status shows, sorted.
func votersAt(addr string) string {
	s, err := status(addr)
	if err != nil {
		return err.Error()
	}
	var ids []string
	for _, m := range s.Members {
		if m.Voter {
			ids = append(ids, m.ID)
		}
	}
	slices.Sort(ids)
	return strings.Join(ids, " ")
}

func (c *e2eCluster) start(n *agentProc, extra ...string) {
	c.t.Helper()
	if n.cmd == nil {
		// setupE2E's ports were free when it chose them, seconds ago; an
		// outgoing connection's ephemeral port may have taken one since
		// ("address is already in use"). A node never started has told
		// nobody its addresses yet: choose again rather than fail.
		n.raft, n.http = stillFree(c.t, n.raft), stillFree(c.t, n.http)
	}
	args := append([]string{"agent", "--config", c.config, "--node-id", n.id, "--data-dir", n.data,
		"--raft-addr", n.raft, "--http-addr", n.http, "--rules", c.rules, "--log-level", "info"}, extra...)
	bin := heraldBin
	if n.bin != "" {
		bin = n.bin
	}
	cmd := exec.Command(bin, args...)
	logf, err := os.OpenFile(filepath.Join(c.dir, n.id+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(c.t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(c.t, cmd.Start())
	n.cmd, n.log = cmd, logf
}

func (c *e2eCluster) stopAll() {
	for _, n := range c.nodes {
		if n.cmd != nil && n.cmd.ProcessState == nil {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = n.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = n.cmd.Process.Kill()
				<-done
			}
		}
		if n.log != nil {
			_ = n.log.Close()
		}
	}
	if c.t.Failed() {
		for _, n := range c.nodes {
			b, _ := os.ReadFile(filepath.Join(c.dir, n.id+".log"))
			c.t.Logf("---- %s log (tail) ----\n%s", n.id, tail(string(b), 60))
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (c *e2eCluster) kill(n *agentProc) {
	c.t.Helper()
	require.NoError(c.t, n.cmd.Process.Signal(syscall.SIGKILL))
	_ = n.cmd.Wait()
}

// cli runs the herald binary as a user would and returns its output.
func (c *e2eCluster) cli(args ...string) (string, error) {
	out, err := exec.Command(heraldBin, args...).CombinedOutput()
	return string(out), err
}

type statusView struct {
	NodeID   string `json:"node_id"`
	LeaderID string `json:"leader_id"`
	State    string `json:"state"`
	Members  []struct {
		ID     string `json:"id"`
		Voter  bool   `json:"voter"`
		Leader bool   `json:"leader"`
	} `json:"members"`
	AppliedIndex uint64 `json:"applied_index"`
}

func status(addr string) (statusView, error) {
	var s statusView
	err := getJSON(addr, "/v1/status", &s)
	return s, err
}

func getJSON(addr, path string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return (&cluster.Client{Addr: addr}).Do(ctx, http.MethodGet, path, nil, out)
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return poll.Until(t, within, what, cond)
}

func (c *e2eCluster) leader(among ...*agentProc) *agentProc {
	for _, n := range among {
		if s, err := status(n.http); err == nil && s.State == "leader" {
			return n
		}
	}
	return nil
}

type outboxLine struct {
	Key       string          `json:"key"`
	Recipient string          `json:"recipient"`
	Payload   json.RawMessage `json:"payload"`
	Duplicate bool            `json:"duplicate"`
}

// delivered reads the outbox: recipient → slot → deliveries not marked duplicate.
func (c *e2eCluster) delivered() (map[string]map[string]int, int) {
	f, err := os.Open(c.outbox)
	if err != nil {
		return nil, 0
	}
	defer f.Close()
	out := map[string]map[string]int{}
	raw := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l outboxLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue // a line being written
		}
		raw++
		if l.Duplicate {
			continue
		}
		var p struct{ Content string }
		require.NoError(c.t, json.Unmarshal(l.Payload, &p))
		if out[l.Recipient] == nil {
			out[l.Recipient] = map[string]int{}
		}
		out[l.Recipient][p.Content]++
	}
	return out, raw
}

// requireEachSlotOnce fails unless every person in the outbox got each
// slot exactly once, and returns what delivered read.
func (c *e2eCluster) requireEachSlotOnce() (map[string]map[string]int, int) {
	c.t.Helper()
	got, raw := c.delivered()
	for who, slots := range got {
		for s, n := range slots {
			require.Equal(c.t, 1, n, "%s got slot %s %d times", who, s, n)
		}
	}
	return got, raw
}

func (c *e2eCluster) slotsDelivered() int {
	d, _ := c.delivered()
	return len(d["alice"])
}

func TestClusterSurvivesLeaderKill(t *testing.T) {
	c := setupE2E(t)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	c.start(n1, "--bootstrap")
	eventually(t, 20*time.Second, "n1 leads", func() bool { return c.leader(n1) == n1 })
	c.start(n2)
	c.start(n3)
	for _, n := range []*agentProc{n2, n3} {
		eventually(t, 20*time.Second, n.id+" serves HTTP", func() bool { _, err := status(n.http); return err == nil })
		out, err := c.cli("cluster", "join", "--addr", n1.http, "--id", n.id, "--raft-addr", n.raft, "--http-addr", n.http)
		require.NoError(t, err, out)
	}
	eventually(t, 20*time.Second, "three voters and one leader", func() bool {
		s, err := status(n3.http)
		voters, leaders := 0, 0
		for _, m := range s.Members {
			if m.Voter {
				voters++
			}
			if m.Leader {
				leaders++
			}
		}
		return err == nil && voters == 3 && leaders == 1
	})
	out, err := c.cli("cluster", "status", "--addr", n2.http)
	require.NoError(t, err, out)
	t.Logf("herald cluster status:\n%s", out)

	eventually(t, 30*time.Second, "slots delivered", func() bool { return c.slotsDelivered() >= 3 })

	old := c.leader(c.nodes...)
	require.NotNil(t, old)
	c.kill(old)
	var rest []*agentProc
	for _, n := range c.nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	took := eventually(t, 5*time.Second, "a new leader after SIGKILL", func() bool { return c.leader(rest...) != nil })
	t.Logf("new leader %s elected %s after SIGKILL of %s", c.leader(rest...).id, took.Round(time.Millisecond), old.id)

	before := c.slotsDelivered()
	eventually(t, 30*time.Second, "slots delivered by the new leader", func() bool { return c.slotsDelivered() >= before+3 })

	c.start(old)
	eventually(t, 30*time.Second, old.id+" rejoined as a follower", func() bool {
		s, err := status(old.http)
		return err == nil && s.State == "follower" && s.LeaderID != ""
	})
	lead, _ := status(c.leader(rest...).http)
	eventually(t, 30*time.Second, old.id+" caught up", func() bool {
		s, err := status(old.http)
		return err == nil && s.AppliedIndex >= lead.AppliedIndex
	})
	before = c.slotsDelivered()
	eventually(t, 30*time.Second, "more slots after the rejoin", func() bool { return c.slotsDelivered() >= before+2 })
	settled := time.Now().Add(-3 * time.Second) // later slots may be in flight at the stop
	c.stopAll()

	// Every slot from the first to the last one delivered reached both
	// people exactly once: none twice, none skipped.
	got, raw := c.delivered()
	for _, who := range []string{"alice", "bob"} {
		var slots []string
		for s, n := range got[who] {
			require.Equal(t, 1, n, "%s got slot %s %d times", who, s, n)
			if at, err := time.Parse(time.RFC3339, s); err == nil && at.Before(settled) {
				slots = append(slots, s)
			}
		}
		sort.Slice(slots, func(i, j int) bool { return mustTime(t, slots[i]).Before(mustTime(t, slots[j])) })
		require.NotEmpty(t, slots)
		first, err := time.Parse(time.RFC3339, slots[0])
		require.NoError(t, err)
		last, err := time.Parse(time.RFC3339, slots[len(slots)-1])
		require.NoError(t, err)
		require.Equal(t, int(last.Sub(first)/time.Second)+1, len(slots), "%s: a slot between %s and %s was skipped", who, first, last)
	}
	t.Logf("%d slots delivered exactly once to each of 2 people; %d raw receipts in the outbox", len(got["alice"]), raw)
}

func mustTime(t *testing.T, s string) time.Time {
	at, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return at
}
