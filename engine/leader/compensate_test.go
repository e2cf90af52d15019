package leader

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// cancellingRules' on_failed is cut short by the end of leadership.
type cancellingRules struct {
	*simRules
	cancel context.CancelFunc
}

func (r *cancellingRules) OnFailed(ctx context.Context, _ string, _ engine.RunContext, _ engine.FailedDelivery, _ engine.SubmitFunc) error {
	r.cancel()
	<-ctx.Done()
	return ctx.Err()
}

// on_failed runs at least once: a hook cut short because leadership ended
// is not recorded as run, whatever the replicator does with a proposal made
// as the context ends.
func TestOnFailedCutShortIsNotRecordedAsRun(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := newSim(t, start)
	_, id := s.oneDelivery(start)
	c := s.apply(engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{id}, Leader: "n1", Now: start, Timeout: time.Minute}).(engine.ClaimResult)
	s.apply(engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: start, Results: []engine.Settlement{{ID: id, Seq: c.Claimed[0].Seq, Status: heraldtype.StatusPermanent}}})
	require.Len(t, s.log.fsm.ToCompensate(10), 1)

	ctx, cancel := context.WithCancel(s.ctx)
	s.cfg.Rules = &cancellingRules{simRules: s.rules, cancel: cancel}
	s.lead("n1")
	s.house.compensate(ctx)
	require.Len(t, s.log.fsm.ToCompensate(10), 1, "on_failed was cut short, yet recorded as run")
}
