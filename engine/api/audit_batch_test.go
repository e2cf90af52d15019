package api

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/enginetest/poll"
)

// gatedLog is a one-node log that records the type of every command it
// applies and holds the first audit record until release is closed.
type gatedLog struct {
	*enginetest.Replicator
	release chan struct{}
	mu      sync.Mutex
	types   []engine.CommandType
	held    bool
}

func (g *gatedLog) Apply(ctx context.Context, cmd []byte) (any, error) {
	t := engine.CommandType(cmd[0])
	g.mu.Lock()
	g.types = append(g.types, t)
	hold := !g.held && (t == engine.CmdRecordAudit || t == engine.CmdRecordAudits)
	g.held = g.held || hold
	g.mu.Unlock()
	if hold {
		<-g.release
	}
	return g.Replicator.Apply(ctx, cmd)
}

func (g *gatedLog) applied() []engine.CommandType {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]engine.CommandType(nil), g.types...)
}

// recordAt20 has 20 writers record at once while the first writer's
// record is held, and returns each writer's outcome (by its target's
// number) and the commands the log applied.
func recordAt20(t *testing.T, memberFSM uint16, bad int) ([]error, []engine.CommandType, *engine.FSM) {
	t.Helper()
	rep := enginetest.New()
	rep.MustApply(t, engine.CmdUpsertMember, engine.Member{ID: "n1", FSMVersion: engine.FSMVersion})
	rep.MustApply(t, engine.CmdUpsertMember, engine.Member{ID: "n2", FSMVersion: memberFSM})
	g := &gatedLog{Replicator: rep, release: make(chan struct{})}
	b := &auditBatch{s: &server{cfg: Config{FSM: rep.FSM, Replicator: g}}}
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	rec := func(i int) {
		r := engine.RecordAudit{At: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC), Actor: "ci", Role: "operate", Action: "task.submit", Target: fmt.Sprint("k", i), Status: 201, Node: "n1"}
		if i == bad {
			r.Action = "" // refused by Apply
		}
		errs[i] = b.record(context.Background(), r)
	}
	wg.Go(func() { rec(0) })
	poll.Until(t, 10*time.Second, "the first record is held", func() bool { return len(g.applied()) > 0 })
	for i := 1; i < n; i++ {
		wg.Go(func() { rec(i) })
	}
	poll.Until(t, 10*time.Second, "every writer waits", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.pending) == n-1
	})
	close(g.release)
	wg.Wait()
	return errs, g.applied(), rep.FSM
}

// Writes answered while a record is being replicated have theirs
// replicated together, in one RecordAudits, and each writer learns its
// own record's outcome: a refused one does not refuse the others.
func TestAuditRecordsOfWritesTogetherGoInOneEntry(t *testing.T) {
	t.Parallel()
	errs, applied, fsm := recordAt20(t, engine.FSMVersion, 7)
	require.Equal(t, []engine.CommandType{engine.CmdRecordAudit, engine.CmdRecordAudits}, applied,
		"the first record alone, the nineteen that waited for it in one entry")
	for i, err := range errs {
		if i == 7 {
			require.ErrorContains(t, err, "action and actor are required")
			continue
		}
		require.NoError(t, err, "writer %d", i)
	}
	page := fsm.Audit(engine.AuditQuery{Limit: 100})
	require.Len(t, page.Records, 19)
	targets := map[string]bool{}
	for _, r := range page.Records {
		targets[r.Target] = true
	}
	require.Len(t, targets, 19, "every record stored once")
	require.False(t, targets["k7"])
}

// While a member applies FSM version 4, which has no RecordAudits, the
// records still go, one an entry.
func TestAuditRecordsOneByOneWhileAMemberIsBehind(t *testing.T) {
	t.Parallel()
	errs, applied, fsm := recordAt20(t, engine.FSMAuditBatches-1, -1)
	for i, err := range errs {
		require.NoError(t, err, "writer %d", i)
	}
	require.Len(t, applied, 20)
	for _, ct := range applied {
		require.Equal(t, engine.CmdRecordAudit, ct)
	}
	require.Equal(t, 20, fsm.AuditLen())
}
