package leader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

func auditAt(at time.Time, actor, action, target string) engine.RecordAudit {
	return engine.RecordAudit{At: at, Actor: actor, Role: "operate", Remote: "192.0.2.7", Via: "", Action: action, Target: target, Status: 201, Node: "n1"}
}

// The leader prunes the trail with the rest, at its cut-off: records past
// the audit retention (90 days by default) go, younger ones stay.
func TestLeaderPrunesAudit(t *testing.T) {
	t.Parallel()
	later := t0.Add(200 * 24 * time.Hour)
	s := newSim(t, later)
	s.apply(engine.CmdRecordAudit, auditAt(later.Add(-91*24*time.Hour), "ci", "task.submit", "old"))
	s.apply(engine.CmdRecordAudit, auditAt(later.Add(-89*24*time.Hour), "ci", "task.submit", "young"))
	s.lead("n1")
	s.step()
	s.advance(later.Add(pruneAfterElection), time.Minute)
	recs := s.log.fsm.Audit(engine.AuditQuery{Limit: 10}).Records
	require.Len(t, recs, 1, "the record past 90 days is pruned, the other kept")
	require.Equal(t, "young", recs[0].Target)
}
