package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/api"
)

// TestRecoverFromALostQuorum is README "Lost quorum" end to end: three
// nodes with API tasks, two of them SIGKILLed and their data dirs deleted,
// `herald cluster recover` on the stopped survivor, which then leads alone
// with every task; two fresh nodes join it (--join, and herald cluster
// join); every task is delivered, none twice.
func TestRecoverFromALostQuorum(t *testing.T) {
	c := setupE2E(t)
	n1, _, n3 := c.startTaskCluster()

	// Tasks due at once (sent before the loss) and later (due while the
	// cluster has no quorum or after the recovery).
	var tasks []string
	for i := range 16 {
		key := fmt.Sprintf("rq-%02d", i)
		due := time.Now().Add(time.Second)
		if i >= 8 {
			due = time.Now().Add(8 * time.Second)
		}
		submitTask(t, n1.http, key, due)
		tasks = append(tasks, key)
	}
	eventually(t, 20*time.Second, "the first tasks delivered", func() bool {
		got, _ := c.delivered()
		return len(got["dave"]) >= 8
	})
	eventually(t, 20*time.Second, "every node applied every entry", func() bool {
		var idx []uint64
		for _, n := range c.nodes {
			s, err := status(n.http)
			if err != nil {
				return false
			}
			idx = append(idx, s.AppliedIndex)
		}
		return idx[0] == idx[1] && idx[1] == idx[2]
	})
	before := taskCount(t, n3.http)
	require.Equal(t, len(tasks), before)

	// The quorum is lost for good: the leader and one follower are killed
	// and their data dirs deleted. The other follower survives.
	lead := c.leader(c.nodes...)
	require.NotNil(t, lead)
	var survivor *agentProc
	for _, n := range c.nodes {
		if n == lead || survivor != nil {
			c.kill(n)
			require.NoError(t, os.RemoveAll(n.data))
			t.Logf("SIGKILL %s and deleted its data dir", n.id)
			continue
		}
		survivor = n
	}
	out, err := c.cli("cluster", "recover", "--data-dir", survivor.data)
	require.Error(t, err, "recover on a running node's data dir: %s", out)
	require.Contains(t, out, "data dir is in use")
	c.stop(survivor)

	t0 := time.Now()
	out, err = c.cli("cluster", "recover", "--data-dir", survivor.data)
	require.NoError(t, err, out)
	recovered := time.Now()
	t.Logf("herald cluster recover --data-dir %s (took %s):\n%s", survivor.id, recovered.Sub(t0).Round(time.Millisecond), out)
	require.Contains(t, out, "voters now:    "+survivor.id+"="+survivor.raft+"\n")
	c.start(survivor)
	eventually(t, 20*time.Second, survivor.id+" leads alone", func() bool { return c.leader(survivor) == survivor })
	t.Logf("%s leads %s after herald cluster recover began (%s after its start)", survivor.id,
		time.Since(t0).Round(time.Millisecond), time.Since(recovered).Round(time.Millisecond))
	after := taskCount(t, survivor.http)
	t.Logf("tasks before the loss: %d, on the recovered leader: %d", before, after)
	require.Equal(t, before, after)

	n4 := &agentProc{id: "n4", raft: freeAddr(t), http: freeAddr(t), data: filepath.Join(c.dir, "n4")}
	n5 := &agentProc{id: "n5", raft: freeAddr(t), http: freeAddr(t), data: filepath.Join(c.dir, "n5")}
	c.nodes = append(c.nodes, n4, n5)
	c.start(n4, "--join", survivor.http)
	c.start(n5)
	eventually(t, 20*time.Second, "n5 serves HTTP", func() bool { _, err := status(n5.http); return err == nil })
	out, err = c.cli("cluster", "join", "--addr", survivor.http, "--http-addr", n5.http)
	require.NoError(t, err, out)
	want := []string{survivor.id, "n4", "n5"}
	slices.Sort(want)
	eventually(t, 30*time.Second, "the recovered leader and two fresh voters", func() bool {
		return votersAt(n4.http) == strings.Join(want, " ") && votersAt(n5.http) == strings.Join(want, " ")
	})
	for _, n := range []*agentProc{n4, n5} {
		eventually(t, 20*time.Second, n.id+" has every task", func() bool { return taskCount(t, n.http) == before })
	}
	out, err = c.cli("audit", "--addr", survivor.http, "--action", "cluster.recover")
	require.NoError(t, err, out)
	require.Contains(t, out, "cluster.recover")
	t.Logf("herald audit --action cluster.recover:\n%s", out)

	eventually(t, 30*time.Second, "every task delivered", func() bool {
		got, _ := c.delivered()
		return len(got["dave"]) == len(tasks)
	})
	got, raw := c.requireEachSlotOnce()
	t.Logf("%d tasks, %d delivered to dave, each once; %d raw receipts in the outbox", len(tasks), len(got["dave"]), raw)
}

// taskCount is how many tasks the node at addr holds.
func taskCount(t *testing.T, addr string) int {
	t.Helper()
	var page api.TaskList
	if err := getJSON(addr, "/v1/tasks?limit=1000", &page); err != nil {
		return -1
	}
	return len(page.Tasks)
}
