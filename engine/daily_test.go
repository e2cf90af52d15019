package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// One entry of many results updates its day aggregate in place after one
// copy: the aggregate must come out as entries of one result each make it,
// and an aggregate read before the entry must not change.
func TestDayStatsOfAnEntryAsOfSingleResults(t *testing.T) {
	t.Parallel()
	people := []string{"alice", "bob", "carol", "dave", "erin"}
	statuses := []heraldtype.Status{heraldtype.StatusSent, heraldtype.StatusSent, heraldtype.StatusPermanent, heraldtype.StatusSent, heraldtype.StatusConfig}
	run := func(oneEntry bool) (before, after *DayStats) {
		b := setupFSM(t)
		key := b.planned("daily", people...)
		var ids []string
		for _, p := range people {
			ids = append(ids, DeliveryID(key, p))
		}
		c := b.claim("n1", t0, ids...)
		require.Len(t, c, len(people))
		before = b.fsm.DayStats(t0.Format(time.DateOnly))["daily"]
		var rs []Settlement
		for i, cl := range c {
			// Sent over several minutes and latencies: the sketches
			// and the minutes grow inside the one entry.
			rs = append(rs, Settlement{ID: cl.ID, Seq: cl.Seq, Status: statuses[i], Code: "c", Error: "e"})
		}
		if oneEntry {
			b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: t0.Add(90 * time.Second), Results: rs})
		} else {
			for _, r := range rs {
				b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: t0.Add(90 * time.Second), Results: []Settlement{r}})
			}
		}
		return before, b.fsm.DayStats(t0.Format(time.DateOnly))["daily"]
	}
	beforeOne, one := run(true)
	_, single := run(false)
	require.Equal(t, single, one)
	require.Equal(t, 3, one.Sent)
	require.Equal(t, 2, one.Failed)
	require.Equal(t, 0, beforeOne.Sent, "an aggregate read before the entry is not changed by it")
	require.Nil(t, beforeOne.SlotToSentSketch)
	require.Empty(t, beforeOne.Minutes)
}

// The day's aggregates are changed in place only by the Apply that copied
// them: one read after an Apply stays as it was while later ones count.
func TestDayStatsReadStayAsRead(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	key := b.planned("daily", "a", "b")
	settle := func(who string, at time.Time) {
		id := DeliveryID(key, who)
		c := b.claim("n1", at, id)
		require.Len(t, c, 1)
		b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: at, Results: []Settlement{{ID: id, Seq: c[0].Seq, Status: heraldtype.StatusSent}}})
	}
	settle("a", t0.Add(time.Second))
	day := t0.Format(time.DateOnly)
	before := b.fsm.DayStats(day)["daily"]
	require.Equal(t, 1, before.Sent)
	minutes, sketch := len(before.Minutes), before.SlotToSentSketch.Count
	settle("b", t0.Add(5*time.Minute))
	require.Equal(t, 1, before.Sent, "a record read is never changed")
	require.Len(t, before.Minutes, minutes)
	require.Equal(t, sketch, before.SlotToSentSketch.Count)
	require.Equal(t, 2, b.fsm.DayStats(day)["daily"].Sent)
}
