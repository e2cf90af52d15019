package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// Bad input to `herald cluster recover` is refused with the reason; an
// empty data dir is left as it was.
func TestClusterRecoverRefusesBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--data-dir is required"},
		{[]string{"--data-dir", dir, "--voter", "n2"}, `--voter: bad request: voter "n2": want ID=RAFT_ADDR`},
		{[]string{"--data-dir", dir, "--voter", "n2=10.0.0.2"}, `--voter: bad request: voter n2: raft address "10.0.0.2": want host:port`},
		{[]string{"--data-dir", dir, "--voter", "n2=0.0.0.0:7101"}, "not a wildcard"},
		{[]string{"--data-dir", dir}, "holds no Raft state: there is nothing to recover"},
		{[]string{"--data-dir", dir, "--node-id", "n 1"}, "node id"},
	} {
		_, err := runHerald(t, append([]string{"cluster", "recover"}, tc.args...)...)
		require.ErrorContains(t, err, tc.want, tc.args)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}
