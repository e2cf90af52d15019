package main

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/enginetest"
)

// unconfirmed applies every command, but answers the first StartRun with a
// timeout, as a leader does when the write committed but its answer did not
// come back in time (or leadership was lost while committing).
type unconfirmed struct {
	*enginetest.Replicator
	done atomic.Bool
}

func (u *unconfirmed) Apply(ctx context.Context, cmd []byte) (any, error) {
	res, err := u.Replicator.Apply(ctx, cmd)
	if err == nil && len(cmd) > 0 && engine.CommandType(cmd[0]) == engine.CmdStartRun && u.done.CompareAndSwap(false, true) {
		return nil, context.DeadlineExceeded
	}
	return res, err
}

// TestRulesFireNowIsNotRepeatedWhenUnconfirmed: a fire without --slot
// starts a run at the node's "now", so a repeat is another run, sent to
// everyone again. When the first answer is "not confirmed in time", the
// CLI must not send it again by itself, and says what to look at.
func TestRulesFireNowIsNotRepeatedWhenUnconfirmed(t *testing.T) {
	t.Parallel()
	rep := &unconfirmed{Replicator: enginetest.New()}
	var tick atomic.Int64
	srv := httptest.NewServer(api.New(api.Config{
		FSM: rep.FSM, Replicator: rep, Rules: cliRules,
		// Every stamp a second later: a repeat is a new "now".
		NowFunc:    func() time.Time { return cliNow.Add(time.Duration(tick.Add(1)) * time.Second) },
		StatusFunc: func() api.Status { return api.Status{} },
	}))
	t.Cleanup(srv.Close)

	_, err := runHerald(t, "rules", "fire", "daily_report", "--addr", srv.Listener.Addr().String())
	require.ErrorContains(t, err, "a fire without a slot starts a new run each time", "the node's answer")
	require.ErrorContains(t, err, "it may have fired, so it was not repeated")
	require.ErrorContains(t, err, "herald deliveries list --rule daily_report")
	manual := rep.FSM.Runs(func(r *engine.Run) bool { return r.Manual })
	require.Len(t, manual, 1, "one fire typed, one run")
}

// TestRulesFirePausedSaysItWaits: firing a paused rule by hand plans it,
// and the CLI says its messages wait for the resume.
func TestRulesFirePausedSaysItWaits(t *testing.T) {
	t.Parallel()
	addr, _ := startAPI(t)
	_, err := runHerald(t, "rules", "pause", "daily_report", "--addr", addr)
	require.NoError(t, err)
	out, err := runHerald(t, "rules", "fire", "daily_report", "--slot", "2026-11-30T09:00:00+08:00", "--addr", addr, "--tz", "Asia/Shanghai")
	require.NoError(t, err)
	require.Equal(t, "fired daily_report slot 2026-11-30 09:00:00 +08:00: run daily_report@2026-11-30T01:00:00Z\n"+
		"rule daily_report is paused: its messages wait until herald rules resume daily_report\n", out)
}
