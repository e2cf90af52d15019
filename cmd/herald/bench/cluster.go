package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
)

// benchCluster is the local three-node cluster `herald bench` starts: three
// `herald agent` processes of this very binary, in a temporary directory, on
// free loopback ports, sharing one rules directory and one mock outbox
// (so that a new leader's mock knows what the old one delivered).
type benchCluster struct {
	dir     string
	bin     string
	rules   string
	outbox  string
	nodes   []*benchNode
	logLvl  string
	channel map[string]any
}

// benchNode is one agent process of a benchCluster.
type benchNode struct {
	id, raft, http   string
	pprof            string // pprof_addr, when profiling
	cfgPath, logPath string
	cmd              *exec.Cmd
	exited           chan struct{}
	// peakRSS is the largest VmHWM (peak resident set) seen of this node's
	// processes, over restarts.
	peakRSS uint64
}

// pickFreeAddr returns a loopback address whose port was free a moment ago.
func pickFreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// newBenchCluster lays out dir (rules, outbox, one data dir and config per
// node) for a cluster whose mock channel has the given extra keys (limits).
func newBenchCluster(dir, logLevel string, mockExtra map[string]any, profile bool) (*benchCluster, error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: cannot find this binary: %w", err)
	}
	c := &benchCluster{dir: dir, bin: bin, rules: filepath.Join(dir, "rules"), outbox: filepath.Join(dir, "outbox.jsonl"), logLvl: logLevel}
	if err := os.MkdirAll(c.rules, 0o755); err != nil {
		return nil, err
	}
	c.channel = map[string]any{"plugin": "mock", "outbox": c.outbox}
	for k, v := range mockExtra {
		c.channel[k] = v
	}
	for i := range 3 {
		n := &benchNode{id: fmt.Sprintf("n%d", i+1)}
		if n.raft, err = pickFreeAddr(); err != nil {
			return nil, err
		}
		if n.http, err = pickFreeAddr(); err != nil {
			return nil, err
		}
		cfg := map[string]any{
			"node_id": n.id, "data_dir": filepath.Join(dir, n.id), "raft_addr": n.raft, "http_addr": n.http,
			"rules": c.rules, "log_level": logLevel, "channels": map[string]any{"mock": c.channel},
		}
		if profile {
			if n.pprof, err = pickFreeAddr(); err != nil {
				return nil, err
			}
			cfg["pprof_addr"] = n.pprof
		}
		if i == 0 {
			cfg["bootstrap"] = true
		} else {
			cfg["join"] = c.nodes[0].http
		}
		b, err := yaml.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		n.cfgPath = filepath.Join(dir, n.id+".yaml")
		n.logPath = filepath.Join(dir, n.id+".log")
		if err := os.WriteFile(n.cfgPath, b, 0o644); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	return c, nil
}

// start starts the three nodes (the first bootstraps, the others join it)
// and returns when all three are members and a leader is known.
func (c *benchCluster) start(ctx context.Context) error {
	for i, n := range c.nodes {
		if err := c.startNode(n); err != nil {
			return err
		}
		if i == 0 {
			if err := c.waitReady(ctx, 1, 2*time.Minute); err != nil {
				return err
			}
		}
	}
	return c.waitReady(ctx, 3, 2*time.Minute)
}

// startNode starts (or restarts, with its data) one agent in its own
// process group, so that a kill takes its plugin processes with it, as a
// machine that dies would.
func (c *benchCluster) startNode(n *benchNode) error {
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, "agent", "--config", n.cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("bench: start %s: %w", n.id, err)
	}
	n.cmd = cmd
	n.exited = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(n.exited)
	}()
	return nil
}

// waitReady waits until a live node reports members members and a leader,
// every member's build recorded (the leader asks a new member for it within
// a couple of seconds; until then it writes the log in the form every
// build reads, not the packed bodies), and every live member answers.
func (c *benchCluster) waitReady(ctx context.Context, members int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		st, err := c.status(ctx)
		switch {
		case err != nil:
			last = err
		case len(st.Members) < members || st.LeaderID == "":
			last = fmt.Errorf("%d of %d members, leader %q", len(st.Members), members, st.LeaderID)
		case slices.ContainsFunc(st.Members, func(m api.MemberStatus) bool { return m.FSMVersion != engine.FSMVersion }):
			last = errors.New("a member's build is not recorded yet")
		default:
			ok := true
			for _, n := range c.live() {
				if _, err := benchStatus(ctx, n.http); err != nil {
					ok, last = false, fmt.Errorf("%s: %w", n.id, err)
				}
			}
			if ok {
				return nil
			}
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("bench: cluster not ready after %s: %v (logs in %s)", limit, last, c.dir)
}

// live returns the nodes whose process runs.
func (c *benchCluster) live() []*benchNode {
	var out []*benchNode
	for _, n := range c.nodes {
		if n.cmd != nil && !n.done() {
			out = append(out, n)
		}
	}
	return out
}

func (n *benchNode) done() bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

// status asks the live nodes in turn for /v1/status.
func (c *benchCluster) status(ctx context.Context) (api.Status, error) {
	err := errors.New("no node is running")
	for _, n := range c.live() {
		var st api.Status
		if st, err = benchStatus(ctx, n.http); err == nil {
			return st, nil
		}
	}
	return api.Status{}, err
}

// leader returns the node that leads now, as the live nodes see it,
// waiting up to a minute for one (an election may be under way).
func (c *benchCluster) leader(ctx context.Context) (*benchNode, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := c.status(ctx)
		if err == nil {
			for _, n := range c.live() {
				if n.id == st.LeaderID {
					return n, nil
				}
			}
			err = fmt.Errorf("no live leader (leader_id %q)", st.LeaderID)
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
}

// kill ends a node and its plugins at once (SIGKILL to its process group).
func (c *benchCluster) kill(n *benchNode) {
	n.sampleRSS()
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.exited
}

// stop stops every live node: SIGTERM to its process group, SIGKILL after
// 20 seconds.
func (c *benchCluster) stop() {
	for _, n := range c.live() {
		n.sampleRSS()
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
	}
	for _, n := range c.nodes {
		if n.cmd == nil {
			continue
		}
		select {
		case <-n.exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
			<-n.exited
		}
	}
}

// sampleRSS records the node process's peak resident set so far (VmHWM,
// Linux only; elsewhere nothing is recorded).
func (n *benchNode) sampleRSS() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	if v := vmHWM(n.cmd.Process.Pid); v > n.peakRSS {
		n.peakRSS = v
	}
}

// vmHWM reads a process's peak resident set in bytes from /proc; 0 when
// it cannot.
func vmHWM(pid int) uint64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// benchStatus fetches one node's /v1/status.
func benchStatus(ctx context.Context, addr string) (api.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var st api.Status
	c := &cluster.Client{Addr: addr, HTTP: benchHTTP}
	return st, c.Do(ctx, http.MethodGet, "/v1/status", nil, &st)
}

// benchHTTP is the bench's HTTP client: short timeouts, loopback, and
// the idle connections of a member's own peer transport, so that
// --concurrency clients measure the cluster, not a TCP dial a request.
var benchHTTP = &http.Client{Timeout: 10 * time.Second, Transport: cluster.PeerTransport()}

// sleepCtx waits d or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
