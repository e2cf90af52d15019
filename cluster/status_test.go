package cluster

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStatusTable(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	require.NoError(t, Status{
		NodeID: "n2", LeaderID: "n1", State: "follower", Term: 3, AppliedIndex: 42,
		Members: []MemberStatus{
			{ID: "n1", RaftAddr: "127.0.0.1:7101", HTTPAddr: "127.0.0.1:8101", Voter: true, Leader: true},
			{ID: "n2", RaftAddr: "127.0.0.1:7102", Voter: true},
			{ID: "r1", RaftAddr: "127.0.0.1:7103", Suffrage: "nonvoter"},
		},
	}.WriteTable(&buf))
	want := `node n2 is follower; leader n1; term 3; applied index 42

ID  RAFT ADDR       HTTP ADDR       SUFFRAGE  LEADER
n1  127.0.0.1:7101  127.0.0.1:8101  voter     yes
n2  127.0.0.1:7102  -               voter     no
r1  127.0.0.1:7103  -               nonvoter  no
`
	require.Equal(t, want, buf.String())
}
