package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCorruptDataDirWipeAndRejoin is README "A corrupt data dir" end to
// end: a follower whose raft.db is damaged refuses to start, naming the
// file and the way back; done as it says (data dir moved aside, started
// empty with --join), it is a voter again with every task, and no task is
// delivered twice.
func TestCorruptDataDirWipeAndRejoin(t *testing.T) {
	c := setupE2E(t)
	n1, _, n3 := c.startTaskCluster()
	var tasks []string
	for i := range 6 {
		key := fmt.Sprintf("cd-%02d", i)
		submitTask(t, n1.http, key, time.Now().Add(time.Second))
		tasks = append(tasks, key)
	}
	eventually(t, 20*time.Second, "n3 holds every task", func() bool { return taskCount(t, n3.http) == len(tasks) })

	c.stop(n3)
	db := filepath.Join(n3.data, "raft.db")
	fh, err := os.OpenFile(db, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fh.WriteAt(make([]byte, 8192), 0) // both of bbolt's meta pages
	require.NoError(t, err)
	require.NoError(t, fh.Close())

	c.start(n3)
	done := make(chan error, 1)
	go func() { done <- n3.cmd.Wait() }()
	select {
	case err := <-done:
		require.Error(t, err, "n3 started on a damaged raft.db")
	case <-time.After(30 * time.Second):
		t.Fatal("n3 neither started nor stopped within 30s")
	}
	_ = n3.log.Close()
	n3.log = nil
	b, err := os.ReadFile(filepath.Join(c.dir, "n3.log"))
	require.NoError(t, err)
	msg := lastLine(string(b))
	t.Logf("n3 on a damaged raft.db: %s", msg)
	require.Contains(t, msg, "herald: data dir is damaged: "+db+" cannot be read")
	require.Contains(t, msg, `README, "A corrupt data dir"`)
	require.Contains(t, msg, "move "+n3.data+" aside")

	require.NoError(t, os.Rename(n3.data, n3.data+".damaged"))
	c.start(n3, "--join", n1.http)
	eventually(t, 30*time.Second, "n3 is back with every task", func() bool {
		s, err := status(n3.http)
		return err == nil && s.LeaderID != "" && taskCount(t, n3.http) == len(tasks)
	})
	require.Equal(t, "n1 n2 n3", votersAt(n3.http))
	for i := range 2 {
		key := fmt.Sprintf("cd-after-%d", i)
		submitTask(t, n3.http, key, time.Now().Add(time.Second))
		tasks = append(tasks, key)
	}
	eventually(t, 30*time.Second, "every task delivered", func() bool {
		got, _ := c.delivered()
		return len(got["dave"]) == len(tasks)
	})
	eventually(t, 20*time.Second, "n3 holds every task", func() bool { return taskCount(t, n3.http) == len(tasks) })
	got, _ := c.requireEachSlotOnce()
	t.Logf("%d tasks, %d delivered to dave, each once; n3 rejoined with all of them", len(tasks), len(got["dave"]))
}
