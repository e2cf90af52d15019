package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNonVoterConfig: non_voter is read from the file, HERALD_NON_VOTER
// and --non-voter like every other key, reaches the cluster config, and
// with bootstrap is refused naming both.
func TestNonVoterConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.yaml")
	require.NoError(t, os.WriteFile(path, []byte("node_id: r1\ndata_dir: d\nraft_addr: 127.0.0.1:1\nhttp_addr: 127.0.0.1:2\njoin: 127.0.0.1:3\nnon_voter: true\n"), 0o600))
	load := func(set map[string]string) (nodeConfig, error) {
		var cfg nodeConfig
		cmd := newAgentCmd()
		require.NoError(t, cmd.Flags().Set("config", path))
		for k, v := range set {
			require.NoError(t, cmd.Flags().Set(k, v))
		}
		return cfg, cfg.load(cmd)
	}
	cfg, err := load(nil)
	require.NoError(t, err)
	require.True(t, cfg.NonVoter, "from the file")

	t.Setenv("HERALD_NON_VOTER", "false")
	cfg, err = load(nil)
	require.NoError(t, err)
	require.False(t, cfg.NonVoter, "the variable wins over the file")
	cfg, err = load(map[string]string{"non-voter": "true"})
	require.NoError(t, err)
	require.True(t, cfg.NonVoter, "the flag wins over the variable")

	_, err = load(map[string]string{"non-voter": "true", "join": "", "bootstrap": "true"})
	require.ErrorContains(t, err, "a non-voter cannot bootstrap (non_voter with bootstrap)")

	c := nodeConfig{NodeID: "r1", DataDir: "d", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2", Join: "127.0.0.1:3", NonVoter: true}
	require.NoError(t, c.validate())
	c.Join, c.Bootstrap = "", true
	require.ErrorContains(t, c.validate(), "non_voter with bootstrap")
}
