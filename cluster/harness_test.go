package cluster

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/heraldhq/herald/engine"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitTimeout bounds every poll in these tests; elections with DevConfig
// timeouts take well under a second, -race and a busy CI machine included.
const waitTimeout = 15 * time.Second

func testLogger() *slog.Logger {
	if os.Getenv("HERALD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// leadEvent is what the harness's lead func reports.
type leadEvent struct {
	node    string
	started bool // false: stopped (its ctx was cancelled)
}

// testNode is one in-process node: raft, an HTTP server and RunLeader.
type testNode struct {
	id       string
	dir      string
	raftAddr string
	sm       *testSM
	node     *Node
	srv      *httptest.Server
	handler  *swapHandler // what srv serves: tests may swap it
	stopOnce sync.Once
	stopLead context.CancelFunc
	leadDone chan struct{}
}

type nodeOpts struct {
	id        string
	dir       string
	raftAddr  string // "" picks a free port
	bootstrap bool
	join      string
	events    chan<- leadEvent // nil: lead events are dropped
	modify    func(*Config)
	noStart   bool    // New only: the caller calls Start
	sm        *testSM // nil: a new, empty one
}

// swapHandler lets the HTTP server exist (and so its address be known)
// before the node that serves it.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	http.Error(w, "starting", http.StatusServiceUnavailable)
}

// newTestNode starts a node and registers its stop with t.Cleanup.
func newTestNode(t *testing.T, o nodeOpts) *testNode {
	t.Helper()
	tn, err := tryTestNode(t, o)
	require.NoError(t, err)
	return tn
}

func tryTestNode(t *testing.T, o nodeOpts) (*testNode, error) {
	t.Helper()
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	addr := o.raftAddr
	if addr == "" {
		addr = loopbackAddr(t)
	}
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)

	sw := &swapHandler{}
	srv := httptest.NewUnstartedServer(sw)
	if o.sm == nil {
		o.sm = newTestSM()
	}
	tn := &testNode{id: o.id, dir: o.dir, raftAddr: ln.Addr().String(), sm: o.sm, srv: srv, handler: sw}
	cfg := DevConfig(Config{
		NodeID:       o.id,
		DataDir:      o.dir,
		RaftListener: ln,
		HTTPAddr:     srv.Listener.Addr().String(),
		Bootstrap:    o.bootstrap,
		Join:         o.join,
		Logger:       testLogger(),
		JoinTimeout:  waitTimeout,
	})
	if o.modify != nil {
		o.modify(&cfg)
	}
	n, err := New(cfg, tn.sm)
	if err != nil {
		srv.Close()
		return nil, err
	}
	tn.node = n
	mux := http.NewServeMux()
	mux.Handle("/v1/cluster/", n.Handler())
	mux.Handle("/", n.ForwardWrites(appHandler(n)))
	var h http.Handler = mux
	sw.h.Store(&h)
	srv.Start()
	t.Cleanup(tn.stop)

	ctx, cancel := context.WithCancel(context.Background())
	tn.stopLead = cancel
	tn.leadDone = make(chan struct{})
	go func() {
		defer close(tn.leadDone)
		n.RunLeader(ctx, func(ctx context.Context) {
			report(ctx, o.events, leadEvent{node: o.id, started: true})
			<-ctx.Done()
			report(context.Background(), o.events, leadEvent{node: o.id, started: false})
		})
	}()
	if o.noStart {
		return tn, nil
	}
	sctx, scancel := context.WithTimeout(context.Background(), waitTimeout)
	defer scancel()
	if err := n.Start(sctx); err != nil {
		tn.stop()
		return nil, err
	}
	return tn, nil
}

func report(ctx context.Context, ch chan<- leadEvent, ev leadEvent) {
	if ch == nil {
		return
	}
	select {
	case ch <- ev:
	case <-ctx.Done():
	}
}

// appHandler stands for the engine's API: POST /kv?key=&value= writes
// through Apply; POST /echo answers 201 with the body's length and SHA-256
// and the request's X-Test header; anything else answers with the serving
// node's id.
func appHandler(n *Node) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/echo" {
			h := sha256.New()
			size, err := io.Copy(h, r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("X-Echo", r.Header.Get("X-Test"))
			w.Header().Set("X-Served-By", n.cfg.NodeID)
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, "%d %x", size, h.Sum(nil))
			return
		}
		if r.Method == http.MethodPost && r.URL.Path == "/kv" {
			if _, err := n.Apply(r.Context(), setCmd(r.URL.Query().Get("key"), r.URL.Query().Get("value"))); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = io.WriteString(w, n.cfg.NodeID)
	})
}

// stop shuts the node down (as a crash would, without leaving) and waits
// for its RunLeader to return.
func (tn *testNode) stop() {
	tn.stopOnce.Do(func() {
		tn.srv.Close()
		_ = tn.node.Shutdown()
		tn.stopLead()
		<-tn.leadDone
		if tr, ok := http.DefaultTransport.(*http.Transport); ok {
			tr.CloseIdleConnections()
		}
	})
}

func (tn *testNode) httpAddr() string { return tn.srv.Listener.Addr().String() }

func (tn *testNode) client() *Client { return &Client{Addr: tn.httpAddr()} }

// newCluster bootstraps nodes[0] and joins the rest through its HTTP API,
// then waits until every node sees every voter and every member record.
func newCluster(t *testing.T, size int, events chan<- leadEvent, modify func(*Config)) []*testNode {
	t.Helper()
	ids := []string{"n1", "n2", "n3", "n4", "n5"}[:size]
	nodes := []*testNode{newTestNode(t, nodeOpts{id: ids[0], bootstrap: true, events: events, modify: modify})}
	for _, id := range ids[1:] {
		nodes = append(nodes, newTestNode(t, nodeOpts{id: id, join: nodes[0].httpAddr(), events: events, modify: modify}))
	}
	waitConverged(t, nodes)
	return nodes
}

// waitConverged waits until every node knows a leader, has every node as a
// voter, and holds every node's current member record.
func waitConverged(t *testing.T, nodes []*testNode) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, tn := range nodes {
			st := tn.node.Status()
			if st.LeaderID == "" || len(st.Members) != len(nodes) {
				return false
			}
			for _, other := range nodes {
				want := engine.Member{ID: other.id, RaftAddr: other.raftAddr, HTTPAddr: other.httpAddr()}
				if !sameAddrs(tn.sm.member(other.id), want) {
					return false
				}
			}
		}
		return true
	}, waitTimeout, 10*time.Millisecond, "cluster did not converge")
}

// leaderOf waits until exactly one of nodes leads and returns it.
func leaderOf(t *testing.T, nodes []*testNode) *testNode {
	t.Helper()
	var leader *testNode
	require.Eventually(t, func() bool {
		leader = nil
		for _, tn := range nodes {
			if tn.node.IsLeader() {
				if leader != nil {
					return false
				}
				leader = tn
			}
		}
		return leader != nil
	}, waitTimeout, 10*time.Millisecond, "no single leader")
	return leader
}

func followersOf(nodes []*testNode, leader *testNode) []*testNode {
	var out []*testNode
	for _, tn := range nodes {
		if tn != leader {
			out = append(out, tn)
		}
	}
	return out
}

// waitValue waits until every node's state machine holds key=value.
func waitValue(t *testing.T, nodes []*testNode, key, value string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, tn := range nodes {
			if tn.sm.get(key) != value {
				return false
			}
		}
		return true
	}, waitTimeout, 10*time.Millisecond, "%s=%s did not replicate", key, value)
}

// servers is the Raft configuration as id -> address, from n's view.
func servers(t *testing.T, n *Node) map[string]string {
	t.Helper()
	f := n.raft.GetConfiguration()
	require.NoError(t, f.Error())
	out := map[string]string{}
	for _, s := range f.Configuration().Servers {
		require.Equal(t, raft.Voter, s.Suffrage)
		out[string(s.ID)] = string(s.Address)
	}
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// testLoopback is the loopback address (127.a.b.c) the nodes of the
// calling test listen on, drawn once per top-level test. Raft has no
// cluster identity on its RPCs: a leader (of another test here, or of
// another test process) still sending to a stopped node's port would be
// taken for a leader by a node whose new listener got that port on
// 127.0.0.1. Once, a test state machine here applied another process's
// SubmitTask that way. On an address of its own no other test reaches it,
// and the test's certificates can name it (devTLS).
func testLoopback(t testing.TB) string {
	t.Helper()
	root, _, _ := strings.Cut(t.Name(), "/")
	if ip, ok := loopbacks.Load(root); ok {
		return ip.(string)
	}
	b := make([]byte, 3)
	_, err := rand.Read(b)
	require.NoError(t, err)
	ip, _ := loopbacks.LoadOrStore(root, fmt.Sprintf("127.%d.%d.%d", 1+b[0]%254, b[1], 1+b[2]%254))
	return ip.(string)
}

var loopbacks sync.Map // top-level test name → its testLoopback

// loopbackAddr is a free port on the test's loopback address.
func loopbackAddr(t testing.TB) string { return net.JoinHostPort(testLoopback(t), "0") }

// freeAddr returns a loopback address (loopbackAddr) where nothing
// listens (now).
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", loopbackAddr(t))
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func postKV(t *testing.T, addr, key, value string) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+addr+"/kv?key="+key+"&value="+value, "text/plain", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// apply proposes cmd on whichever of nodes leads, retrying while leadership
// moves: on a -race run with many clusters on two cores a leader can miss
// its lease and step down, which is Raft working, not a failure.
func apply(t *testing.T, nodes []*testNode, cmd []byte) any {
	t.Helper()
	var (
		resp any
		err  error
	)
	require.Eventually(t, func() bool {
		for _, tn := range nodes {
			if !tn.node.IsLeader() {
				continue
			}
			resp, err = tn.node.Apply(context.Background(), cmd)
			return !errors.Is(err, engine.ErrNotLeader)
		}
		return false
	}, waitTimeout, 10*time.Millisecond, "no leader accepted the command")
	require.NoError(t, err)
	return resp
}
