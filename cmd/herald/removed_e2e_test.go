package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Three real agents: a removed member, wiped and started again with
// --join, is refused and its agent exits saying why; once an admin
// readmits it (herald cluster readmit), the same start joins. (On the code
// before, the second join was taken.)
func TestRemovedMemberRejoinE2E(t *testing.T) {
	c := setupE2E(t)
	n1, n2, n3 := c.startTaskCluster()
	out, err := c.cli("cluster", "remove", n3.id, "--addr", n2.http)
	require.NoError(t, err, out)
	eventually(t, 20*time.Second, "n3 removed", func() bool { return votersAt(n1.http) == "n1 n2" })
	c.stop(n3)

	require.NoError(t, os.RemoveAll(n3.data))
	c.start(n3, "--join", n2.http)
	done := make(chan error, 1)
	go func() { done <- n3.cmd.Wait() }()
	select {
	case err := <-done:
		require.Error(t, err, "the removed member's agent exits")
	case <-time.After(60 * time.Second):
		t.Fatal("the removed member's join was not refused")
	}
	logb, err := os.ReadFile(filepath.Join(c.dir, "n3.log"))
	require.NoError(t, err)
	require.Contains(t, string(logb), "n3 was removed from this cluster", tail(string(logb), 20))
	require.Equal(t, "n1 n2", votersAt(n1.http))

	out, err = c.cli("cluster", "readmit", n3.id, "--addr", n1.http)
	require.NoError(t, err, out)
	require.Contains(t, out, "n3 may join again")
	require.NoError(t, os.RemoveAll(n3.data))
	c.start(n3, "--join", n2.http)
	eventually(t, 30*time.Second, "n3 joins again", func() bool { return votersAt(n1.http) == "n1 n2 n3" })
}
