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
// applies and holds the first groupsInFlight until release is closed.
type gatedLog struct {
	*enginetest.Replicator
	release chan struct{}
	mu      sync.Mutex
	types   []engine.CommandType
	held    int
}

func (g *gatedLog) Apply(ctx context.Context, cmd []byte) (any, error) {
	t := engine.CommandType(cmd[0])
	g.mu.Lock()
	g.types = append(g.types, t)
	hold := g.held < groupsInFlight
	if hold {
		g.held++
	}
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

// recordAt20 has 20 writers record at once while the first
// groupsInFlight writers' records are held, and returns each writer's
// outcome (by its target's number) and the commands the log applied.
func recordAt20(t *testing.T, memberFSM uint16, bad int) ([]error, []engine.CommandType, *engine.FSM) {
	t.Helper()
	rep := enginetest.New()
	rep.MustApply(t, engine.CmdUpsertMember, engine.Member{ID: "n1", FSMVersion: engine.FSMVersion})
	rep.MustApply(t, engine.CmdUpsertMember, engine.Member{ID: "n2", FSMVersion: memberFSM})
	g := &gatedLog{Replicator: rep, release: make(chan struct{})}
	b := newAuditGroup(&server{cfg: Config{FSM: rep.FSM, Replicator: g}})
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	rec := func(i int) {
		r := engine.RecordAudit{At: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC), Actor: "ci", Role: "operate", Action: "task.submit", Target: fmt.Sprint("k", i), Status: 201, Node: "n1"}
		if i == bad {
			r.Action = "" // refused by Apply
		}
		_, errs[i] = b.do(context.Background(), r)
	}
	for i := range groupsInFlight {
		wg.Go(func() { rec(i) })
	}
	poll.Until(t, 10*time.Second, "every slot's record is held", func() bool { return len(g.applied()) == groupsInFlight })
	for i := groupsInFlight; i < n; i++ {
		wg.Go(func() { rec(i) })
	}
	poll.Until(t, 10*time.Second, "every other writer waits", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.pending) == n-groupsInFlight
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
	want := []engine.CommandType{}
	for range groupsInFlight {
		want = append(want, engine.CmdRecordAudit)
	}
	require.Equal(t, append(want, engine.CmdRecordAudits), applied,
		"a record alone in each slot, the others that waited for them in one entry")
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
	errs, applied, fsm := recordAt20(t, engine.FSMGroupedWrites-1, -1)
	for i, err := range errs {
		require.NoError(t, err, "writer %d", i)
	}
	require.Len(t, applied, 20)
	for _, ct := range applied {
		require.Equal(t, engine.CmdRecordAudit, ct)
	}
	require.Equal(t, 20, fsm.AuditLen())
}

// Task submissions that arrive together go in one SubmitTasks, and each
// submitter gets its own answer: created, the same task again, or the
// conflict of a key taken with other data.
func TestTaskSubmissionsTogetherGoInOneEntry(t *testing.T) {
	t.Parallel()
	rep := enginetest.New()
	rep.MustApply(t, engine.CmdUpsertMember, engine.Member{ID: "n1", FSMVersion: engine.FSMVersion})
	g := &gatedLog{Replicator: rep, release: make(chan struct{})}
	s := &server{cfg: Config{FSM: rep.FSM, Replicator: g}}
	group := newTaskGroup(s)
	due := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	task := func(key, data string) engine.SubmitTask {
		return engine.SubmitTask{Key: key, Rule: "follow_up", DueAt: due, Data: []byte(data), Now: due.Add(-time.Hour)}
	}
	var subs []engine.SubmitTask
	for i := range groupsInFlight {
		subs = append(subs, task(fmt.Sprint("slot", i), `{"n":0}`))
	}
	for i := 1; i <= 4; i++ {
		subs = append(subs, task(fmt.Sprint("k", i), `{"n":1}`))
	}
	subs = append(subs, task("k1", `{"n":1}`), task("k2", `{"n":2}`)) // the same again; a conflict
	res := make([]any, len(subs))
	errs := make([]error, len(subs))
	var wg sync.WaitGroup
	for i := range groupsInFlight {
		wg.Go(func() { res[i], errs[i] = group.do(context.Background(), subs[i]) })
	}
	poll.Until(t, 10*time.Second, "every slot's submission is held", func() bool { return len(g.applied()) == groupsInFlight })
	for i := groupsInFlight; i < len(subs); i++ {
		wg.Go(func() { res[i], errs[i] = group.do(context.Background(), subs[i]) })
		// In order, so that k1 and k2 come before their repeats.
		poll.Until(t, 10*time.Second, "the submission waits", func() bool {
			group.mu.Lock()
			defer group.mu.Unlock()
			return len(group.pending) == i-groupsInFlight+1
		})
	}
	close(g.release)
	wg.Wait()
	want := []engine.CommandType{}
	for range groupsInFlight {
		want = append(want, engine.CmdSubmitTask)
	}
	require.Equal(t, append(want, engine.CmdSubmitTasks), g.applied())
	last := len(subs) - 1
	for i := range last - 1 {
		require.NoError(t, errs[i], "submission %d", i)
		require.True(t, res[i].(engine.SubmitResult).Created, "submission %d", i)
	}
	require.NoError(t, errs[last-1])
	require.False(t, res[last-1].(engine.SubmitResult).Created, "the same task again")
	var conflict *engine.TaskConflictError
	require.ErrorAs(t, errs[last], &conflict)
	require.Equal(t, "k2", conflict.Key)
	require.Len(t, rep.FSM.PendingTasks("", 100), groupsInFlight+4)
}
