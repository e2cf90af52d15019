package engine

import (
	"bytes"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// A run's deliveries share their payload, channel name and settled claim
// instead of holding a copy each, as applied and as restored.
func TestDeliveriesShareWhatTheyHaveInCommon(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	var who []string
	for i := range 20 {
		who = append(who, fmt.Sprint("p", i))
	}
	key := b.planned("daily", who...)
	ids := make([]string, len(who))
	for i, w := range who {
		ids[i] = DeliveryID(key, w)
	}
	var results []Settlement
	for _, c := range b.claim("n1", t0, ids...) {
		results = append(results, Settlement{ID: c.ID, Seq: c.Seq, Status: heraldtype.StatusSent})
	}
	b.apply(CmdRecordResults, RecordResults{Leader: "n1", Now: t0.Add(time.Second), Results: results})

	check := func(f *FSM) {
		t.Helper()
		first := b.state(ids[0])
		for _, id := range ids[1:] {
			d, ok := f.Delivery(id)
			require.True(t, ok)
			require.Equal(t, StateSent, d.State)
			require.Same(t, unsafe.SliceData(first.Payload), unsafe.SliceData(d.Payload), "payload shared")
			require.Same(t, unsafe.StringData(first.Channel), unsafe.StringData(d.Channel), "channel name shared")
			require.Same(t, first.Claim, d.Claim, "settled claim shared")
		}
	}
	check(b.fsm)

	snap, err := b.fsm.Snapshot()
	require.NoError(t, err)
	restored := NewFSM()
	require.NoError(t, restored.Restore(bytes.NewReader(persist(t, snap))))
	b.fsm = restored
	check(restored)
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
