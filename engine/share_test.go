package engine

// Named after no source file: what a run's deliveries share is decided in
// apply.go, record.go and packed.go alike; this checks the sum, as applied
// and as restored.

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
