package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRaftTimeouts(t *testing.T) {
	for in, want := range map[string]raftTimeouts{
		"":                                     raftTimeoutsLAN,
		"lan":                                  raftTimeoutsLAN,
		"wan":                                  raftTimeoutsWAN,
		"heartbeat=1s,election=2s,lease=300ms": {Heartbeat: time.Second, Election: 2 * time.Second, Lease: 300 * time.Millisecond},
		" election = 3s ":                      {Heartbeat: 500 * time.Millisecond, Election: 3 * time.Second, Lease: 500 * time.Millisecond},
	} {
		got, err := parseRaftTimeouts(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for in, reason := range map[string]string{
		"fast":                      "want lan, wan",
		"heartbeat=0s":              "positive",
		"beat=1s":                   "unknown timeout",
		"heartbeat=1s,lease=2s":     "lease 2s exceeds heartbeat 1s",
		"heartbeat=2s,election=1s":  "election 1s is below heartbeat 2s",
		"heartbeat=1s,,election=1s": "is not one",
	} {
		_, err := parseRaftTimeouts(in)
		require.ErrorContains(t, err, reason, in)
	}
	c := nodeConfig{NodeID: "n1", DataDir: "d", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2", RaftTimeouts: "wan?"}
	require.ErrorContains(t, c.validate(), `raft_timeouts "wan?"`)
}

func TestPlanAheadConfig(t *testing.T) {
	for in, want := range map[string]time.Duration{"": time.Minute, "0s": 0, "90s": 90 * time.Second, "10m": 10 * time.Minute} {
		got, err := parsePlanAhead(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"11m", "-1s", "soon"} {
		_, err := parsePlanAhead(in)
		require.ErrorContains(t, err, "want a duration from 0s to 10m0s", in)
	}
}

func TestAuditRetentionConfig(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 90 * 24 * time.Hour, "24h": 24 * time.Hour, "8760h": 365 * 24 * time.Hour} {
		got, err := parseAuditRetention(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"1h", "90d", "-24h", "0"} {
		_, err := parseAuditRetention(in)
		require.ErrorContains(t, err, "at least 24h", in)
	}
	c := nodeConfig{NodeID: "n1", DataDir: "d", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2", AuditRetention: "1h"}
	require.ErrorContains(t, c.validate(), `audit_retention "1h"`)
}
