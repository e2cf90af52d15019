package leader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// An acknowledged alert is pruned after retention; when its cause comes
// back, the new alert counts its notifications from 1 again, while the key
// of the first notification's task is still taken (by the task itself, or
// by the ledger once its run is pruned). It must still be delivered, and
// no loop may spin on the taken key.
func TestAlertRaisedAgainAfterPruneIsDelivered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// prune is the retention horizon, after the first notification
		// was delivered at start + a few seconds.
		prune func(start time.Time) time.Time
	}{
		{"task pruned too (its key in the ledger)", func(start time.Time) time.Time { return start.Add(time.Hour) }},
		{"task kept (it ended after the alert's last raise)", func(start time.Time) time.Time { return start.Add(time.Millisecond) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
			s := newSim(t, start, engine.Rule{Name: "ops_alert", Channel: "wecom_ops", Priority: heraldtype.PriorityHigh})
			s.rules.plan["ops_alert"] = func(run engine.RunContext) []engine.Planned {
				return []engine.Planned{{Recipient: "oncall", Payload: run.Data}}
			}
			s.lead("n1")
			s.apply(engine.CmdRaiseAlert, engine.RaiseAlert{Cause: "stuck:wecom", Message: "stuck", Now: start})
			s.advance(start.Add(time.Minute), time.Second)
			require.Len(t, s.sender.sentTo("oncall"), 1)
			id := engine.AlertID("stuck:wecom")
			require.Nil(t, s.apply(engine.CmdAckAlert, engine.AckAlert{ID: id}))

			later := start.Add(8 * 24 * time.Hour)
			s.clock.Set(later)
			res := s.apply(engine.CmdPrune, engine.Prune{Before: tc.prune(start), LedgerBefore: later.Add(-90 * 24 * time.Hour), Now: later}).(engine.PruneResult)
			require.Equal(t, 1, res.Alerts)
			_, ok := s.log.fsm.Alert(id)
			require.False(t, ok, "the acknowledged alert is pruned")

			s.apply(engine.CmdRaiseAlert, engine.RaiseAlert{Cause: "stuck:wecom", Message: "stuck again", Now: later})
			s.advance(later.Add(time.Minute), time.Second)
			// Nothing left due that the loops would spin on.
			now := s.clock.Now()
			require.True(t, s.sched.runOnce(s.ctx).After(now), "the scheduler would spin")
			before := s.log.fsm.AppliedIndex()
			s.house.runOnce(s.ctx)
			require.Equal(t, before, s.log.fsm.AppliedIndex(), "the housekeeper proposes again and again")

			require.Len(t, s.sender.sentTo("oncall"), 2, "the alert raised again is delivered")
			al, _ := s.log.fsm.Alert(id)
			require.Positive(t, al.Notified)
		})
	}
}
