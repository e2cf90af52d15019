package cluster

import (
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// A backup taken through a follower holds every write acknowledged before
// it was asked for. A follower learns that an entry committed only with the
// leader's next message, so a backup asked for just after a write through
// it lacked the last writes (`herald bench tasks --n 1000`: 995 pending
// after the restore, of 1000 acknowledged).
func TestBackupThroughAFollowerHoldsAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	nodes := newCluster(t, 3, nil, nil)
	leader := leaderOf(t, nodes)
	f := followersOf(nodes, leader)[0]
	for i := range 20 {
		apply(t, nodes, setCmd(fmt.Sprint("k", i), fmt.Sprint(i)))
		acked := leader.node.raft.AppliedIndex() // at least the write's index
		h, err := f.node.SaveBackup(ctxT(t), io.Discard)
		require.NoError(t, err)
		require.GreaterOrEqual(t, h.Index, acked, "backup %d through follower %s", i, f.id)
	}
}
