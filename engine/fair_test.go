package engine

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// A backlog that fills Due's limit with its oldest deliveries does not hide
// a small run that just came due: its deliveries are returned too, and the
// executor's order puts them beside the backlog's first, not after it.
func TestDueShowsTheNewestBesideABacklog(t *testing.T) {
	b := setupFSM(t)
	var big []string
	for i := range 400 {
		big = append(big, fmt.Sprintf("u%04d", i))
	}
	bigKey := b.planned("big", big...)

	slot := t0.Add(2 * time.Second)
	smallKey := RunKey("small", slot)
	require.Nil(t, b.apply(CmdStartRun, StartRun{Key: smallKey, Rule: "small", Slot: slot, Now: slot}))
	var nds []NewDelivery
	for _, r := range []string{"a", "b"} {
		nds = append(nds, NewDelivery{ID: DeliveryID(smallKey, r), Recipient: r, Channel: "mock",
			Payload: json.RawMessage(`{}`), Priority: heraldtype.PriorityNormal, NotBefore: slot, Deadline: slot.Add(time.Hour)})
	}
	require.Equal(t, 2, b.apply(CmdAddDeliveries, AddDeliveries{RunKey: smallKey, Deliveries: nds}))

	due := b.fsm.Due(slot, 100)
	runs := map[string]int{}
	for _, d := range due {
		runs[d.RunKey]++
	}
	require.Equal(t, 2, runs[smallKey], "the small run's deliveries are due and returned")
	require.Equal(t, 100+10, runs[bigKey]) // the limit, plus its own newest share

	fairOrder(due)
	require.Equal(t, []string{bigKey, smallKey, bigKey, smallKey, bigKey}, []string{due[0].RunKey, due[1].RunKey, due[2].RunKey, due[3].RunKey, due[4].RunKey},
		"round-robin across runs")

	// Without a backlog nothing is returned twice.
	small := b.fsm.Due(slot, 1000)
	require.Len(t, small, 402)
}

// Priority still comes first: a high delivery goes before any normal one,
// whatever the runs.
func TestFairOrderKeepsPriority(t *testing.T) {
	mk := func(id, run string, p heraldtype.Priority, at time.Duration) *Delivery {
		return &Delivery{ID: id, RunKey: run, Priority: p, State: StatePending, NotBefore: t0.Add(at)}
	}
	due := []*Delivery{mk("a1", "a", heraldtype.PriorityNormal, 0), mk("a2", "a", heraldtype.PriorityNormal, 1), mk("b1", "b", heraldtype.PriorityNormal, 5),
		mk("c-high", "c", heraldtype.PriorityHigh, 9), mk("a-low", "a", heraldtype.PriorityLow, 0)}
	fairOrder(due)
	var got []string
	for _, d := range due {
		got = append(got, d.ID)
	}
	require.Equal(t, []string{"c-high", "a1", "b1", "a2", "a-low"}, got)
}
