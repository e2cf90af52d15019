package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

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
	}, newLogger("error"))
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
