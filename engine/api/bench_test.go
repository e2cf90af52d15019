package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
)

// swap lets an HTTP server exist (its address known) before its handler.
type swap struct{ h atomic.Pointer[http.Handler] }

func (s *swap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	http.Error(w, "starting", http.StatusServiceUnavailable)
}

type benchNode struct {
	node *cluster.Node
	srv  *httptest.Server
}

// startBenchCluster starts three in-process nodes (real Raft over TCP on
// 127.0.0.1, bolt stores in temp dirs) serving the API, and returns them
// with the leader first.
func startBenchCluster(b *testing.B) []*benchNode {
	var nodes []*benchNode
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		sw := &swap{}
		srv := httptest.NewUnstartedServer(sw)
		cfg := cluster.DevConfig(cluster.Config{NodeID: fmt.Sprintf("n%d", i+1), DataDir: b.TempDir(), RaftListener: ln,
			HTTPAddr: srv.Listener.Addr().String(), Bootstrap: i == 0, Logger: log, JoinTimeout: 30 * time.Second})
		if i > 0 {
			cfg.Join = nodes[0].srv.Listener.Addr().String()
		}
		fsm := engine.NewFSM()
		n, err := cluster.New(cfg, fsm)
		if err != nil {
			b.Fatal(err)
		}
		h := api.New(api.Config{Hosts: testHosts, FSM: fsm, Replicator: n, Cluster: n.Handler(), ForwardFunc: n.ForwardWrites, Logger: log,
			StatusFunc: func() api.Status { return api.Status{} }})
		sw.h.Store(&h)
		srv.Start()
		bn := &benchNode{node: n, srv: srv}
		lctx, stopLead := context.WithCancel(context.Background())
		leadDone := make(chan struct{})
		go func() { // the leadership monitor records the leader's HTTP address
			defer close(leadDone)
			n.RunLeader(lctx, func(ctx context.Context) { <-ctx.Done() })
		}()
		b.Cleanup(func() {
			stopLead()
			<-leadDone
			srv.Close()
			_ = n.Shutdown()
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = n.Start(ctx)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, bn)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(nodes[0].node.Status().Members) < 3 || !nodes[0].node.IsLeader() || nodes[1].node.LeaderHTTPAddr() == "" {
		if time.Now().After(deadline) {
			b.Fatal("cluster did not form")
		}
		time.Sleep(10 * time.Millisecond) // polling cluster formation, with a deadline
	}
	return nodes
}

// BenchmarkSubmitTasksThreeNodes submits API tasks over HTTP to a
// three-node cluster, 32 clients at once, to the leader and (forwarded)
// to a follower:
//
//	go test ./engine/api -run '^$' -bench SubmitTasks -benchtime 5000x
func BenchmarkSubmitTasksThreeNodes(b *testing.B) {
	nodes := startBenchCluster(b)
	var seq atomic.Int64 // across runs of the sub-benchmarks: keys stay new
	for _, target := range []struct {
		name string
		addr string
	}{{"leader", nodes[0].srv.URL}, {"follower", nodes[1].srv.URL}} {
		b.Run(target.name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			defer client.CloseIdleConnections()
			due := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
			b.SetParallelism(16) // 2 CPUs → 32 clients
			start := time.Now()
			var once sync.Once
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					body := fmt.Sprintf(`{"key":"%s-%d","rule":"enquiry_timeout","due_at":"%s","data":{"enquiry":"8812"}}`, target.name, seq.Add(1), due)
					resp, err := client.Post(target.addr+"/v1/tasks", "application/json", strings.NewReader(body))
					if err != nil {
						once.Do(func() { b.Error(err) })
						return
					}
					msg, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusCreated {
						once.Do(func() { b.Errorf("%s: HTTP %d: %s", target.name, resp.StatusCode, msg) })
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
		})
	}
}
