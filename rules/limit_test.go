package rules

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine"
)

// A plan stopped at the rule time limit answers an *engine.LimitError
// naming the limit, so that the planner's alert says which and what to
// change (engine/leader: TestRunStoppedAtARuleLimitNamesIt).
func TestPlanPastTheTimeLimitIsALimitError(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{"loop.lua": simpleRule("loop", `while true do end`)}),
		func(c *Config) { c.CallTimeout = 50 * time.Millisecond })
	_, err := plan(t, s, "loop", "")
	var le *engine.LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, engine.LimitError{Limit: "rule time limit", Value: "50ms", Setting: "rule_timeout", Err: le.Err}, *le)
	require.Contains(t, le.Remedy(), "raise rule_timeout")
	require.ErrorIs(t, err, ErrTimeout)
	require.Contains(t, le.Err.Error(), "loop.lua:")
}

// A plan stuck in a library function past the time limit (people.where
// over a million people, say) is a LimitError too, and the watchdog's log
// line names the rule and the limit: it named neither.
func TestPlanStuckInGoNamesTheRuleAndTheLimit(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // lets the abandoned goroutine finish (goleak)
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	s := load(t, newDir(t, map[string]string{"good.lua": simpleRule("good", `return { "alice" }`)}),
		func(c *Config) { c.CallTimeout = 50 * time.Millisecond; c.Logger = logger })
	s.testHook = func(sb *sandbox) {
		sb.base.RawSetString("block", sb.L.NewFunction(func(L *lua.LState) int { <-release; return 0 }))
	}
	writeFiles(t, s.cfg.Dir, map[string]string{"stuck.lua": simpleRule("stuck", `block() return {}`)})
	_, err := s.Reload()
	require.NoError(t, err)
	_, err = plan(t, s, "stuck", "")
	var le *engine.LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, "rule time limit", le.Limit)
	require.Equal(t, "50ms", le.Value)
	require.ErrorIs(t, err, ErrTimeout)
	require.Contains(t, err.Error(), "rule stuck")
	require.Contains(t, err.Error(), "time limit of 50ms")
	mu.Lock()
	logs := buf.String()
	mu.Unlock()
	require.Contains(t, logs, "rule=stuck")
	require.Contains(t, logs, "limit=50ms")
}

// A plan stopped at the memory limit names it and the node setting that
// raises it. Not parallel: a bomb (see memoryLimited).
func TestPlanPastTheMemoryLimitIsALimitError(t *testing.T) {
	s := load(t, newDir(t, map[string]string{
		"join.lua": simpleRule("join", strings.ReplaceAll(manyOperandsBomb, "\n", " ")+` return {}`),
	}), memoryLimited)
	_, err := plan(t, s, "join", "")
	var le *engine.LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, engine.LimitError{Limit: "rule memory limit", Value: "32MiB", Setting: "rule_memory_limit", Err: le.Err}, *le)
	require.ErrorIs(t, err, ErrMemory)
	require.Contains(t, le.Err.Error(), "join.lua:")
	require.Contains(t, le.Remedy(), "raise rule_memory_limit")
}

// A plan stopped by its caller's deadline is not at the rule's limit but
// at the caller's, which the caller names (the planner's PlanTimeout).
func TestPlanStoppedByItsCallerIsNotALimitError(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{"loop.lua": simpleRule("loop", `while true do end`)}),
		func(c *Config) { c.CallTimeout = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := s.Plan(ctx, "loop", runAt(time.Now()))
	require.ErrorIs(t, err, ErrTimeout)
	var le *engine.LimitError
	require.False(t, errors.As(err, &le), "%v", err)
}
