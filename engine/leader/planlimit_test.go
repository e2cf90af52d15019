package leader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// logBuffer collects a leader's log lines; its planners write from their
// own goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// planFailedAtSlot runs rule "big" (one slot at 09:00 Shanghai) whose plan
// answers fail, and returns its one run, its alerts and the leader's log.
func planFailedAtSlot(t *testing.T, fail func(context.Context) error, cfg func(*Config)) (*engine.Run, []*engine.Alert, string) {
	t.Helper()
	slot := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	s := newSim(t, slot.Add(-time.Minute), engine.Rule{Name: "big", Schedule: "0 9 * * *", Timezone: "Asia/Shanghai", Channel: "mock"})
	s.rules.plan["big"] = to("alice", "bob")
	s.rules.fail["big"] = fail
	var logs logBuffer
	s.cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if cfg != nil {
		cfg(&s.cfg)
	}
	s.lead("n1")
	s.advance(slot.Add(time.Minute), time.Millisecond)
	runs := s.runs("big")
	require.Len(t, runs, 1)
	require.Empty(t, s.sender.all(), "a run that failed to plan sends nothing")
	require.Empty(t, s.log.fsm.RunDeliveries(runs[0].Key))
	return runs[0], alertsWith(s.log.fsm, "rule-error:"), logs.String()
}

// A run whose rule was stopped at one of the node's limits (a people file
// too big for the rule time limit, say) fails with that limit named, in
// its record, in one rule-error alert and in the log, with what to change;
// the slot is never silently empty.
func TestRunStoppedAtARuleLimitNamesIt(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		err  *engine.LimitError
		want []string
	}{
		"time": {
			&engine.LimitError{Limit: "rule time limit", Value: "50ms", Setting: "rule_timeout",
				Err: errors.New("big.lua:3: stopped after 50ms: a rule function may run at most that long")},
			[]string{"planning stopped at the rule time limit of 50ms (big.lua:3: stopped after 50ms", "nothing was sent: raise rule_timeout or make the rule cheaper"},
		},
		"memory": {
			&engine.LimitError{Limit: "rule memory limit", Value: "32MiB", Setting: "rule_memory_limit",
				Err: errors.New("big.lua:3: stopped: a string concatenation would make 100MiB, over the rule memory limit of 32MiB")},
			[]string{"planning stopped at the rule memory limit of 32MiB (big.lua:3:", "nothing was sent: raise rule_memory_limit or make the rule cheaper"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run, alerts, logs := planFailedAtSlot(t, func(context.Context) error { return fmt.Errorf("plan: %w", c.err) }, nil)
			require.Equal(t, engine.RunFailed, run.State)
			for _, w := range c.want {
				require.Contains(t, run.Error, w)
			}
			require.Len(t, alerts, 1, "one alert for the run")
			a := alerts[0]
			require.Equal(t, "rule-error:"+run.Key, a.Cause)
			require.Equal(t, engine.AlertRuleError, a.Kind)
			require.Equal(t, 1, a.Count)
			require.Equal(t, "big", a.Rule)
			require.Contains(t, a.Message, "rule big failed to plan "+run.Key+": ")
			require.Contains(t, a.Message, c.want[0])
			require.Contains(t, logs, "rule=big")
			require.Contains(t, logs, "run="+run.Key)
			require.Contains(t, logs, fmt.Sprintf("limit=%q value=%s", c.err.Limit, c.err.Value))
		})
	}
}

// A run whose whole plan outruns PlanTimeout (each rule call within its
// own limit, a million of them not) fails naming the plan time limit; it
// said only "context deadline exceeded".
func TestRunPastThePlanTimeLimitNamesIt(t *testing.T) {
	t.Parallel()
	run, alerts, logs := planFailedAtSlot(t, func(ctx context.Context) error {
		<-ctx.Done()
		return fmt.Errorf("big.lua:9: stopped: %w", context.Cause(ctx)) // as the rules word it
	}, func(c *Config) { c.PlanTimeout = 20 * time.Millisecond })
	require.Equal(t, engine.RunFailed, run.State)
	require.Contains(t, run.Error, "planning stopped at the plan time limit of 20ms (big.lua:9: stopped: context deadline exceeded); nothing was sent: raise plan_timeout or make the rule cheaper")
	require.Len(t, alerts, 1)
	require.Contains(t, alerts[0].Message, "rule big failed to plan "+run.Key+": planning stopped at the plan time limit of 20ms")
	require.Contains(t, logs, `limit="plan time limit" value=20ms`)
}

// A rule's own mistake keeps its error as it was, and is logged with the
// rule's name.
func TestRunFailedByItsRuleKeepsTheError(t *testing.T) {
	t.Parallel()
	run, alerts, logs := planFailedAtSlot(t, func(context.Context) error {
		return errors.New("big.lua:4: attempt to index a nil value")
	}, nil)
	require.Equal(t, engine.RunFailed, run.State)
	require.Equal(t, "big.lua:4: attempt to index a nil value", run.Error)
	require.Len(t, alerts, 1)
	require.Contains(t, logs, "rule=big")
}
