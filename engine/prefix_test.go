package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFindDeliveryByPrefix(t *testing.T) {
	t.Parallel()
	f := &fsmBundle{t: t, fsm: NewFSM(), term: 1}
	now := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	key := RunKey("r", now)
	f.apply(CmdStartRun, StartRun{Key: key, Rule: "r", Slot: now, Now: now})
	ids := []string{"6820f695ccfc0000aaaa", "6820f695ccfc1111bbbb", "77aa00bb11cc22dd"}
	var nds []NewDelivery
	for i, id := range ids {
		nds = append(nds, NewDelivery{ID: id, Recipient: string(rune('a' + i)), Channel: "mock", NotBefore: now, Deadline: now.Add(time.Hour)})
	}
	f.apply(CmdAddDeliveries, AddDeliveries{RunKey: key, Deliveries: nds})

	d, err := f.fsm.FindDelivery("77aa00bb")
	require.NoError(t, err)
	require.Equal(t, ids[2], d.ID)
	d, err = f.fsm.FindDelivery(ids[0])
	require.NoError(t, err)
	require.Equal(t, ids[0], d.ID)
	d, err = f.fsm.FindDelivery("6820f695ccfc1")
	require.NoError(t, err)
	require.Equal(t, ids[1], d.ID)

	_, err = f.fsm.FindDelivery("6820f695ccfc")
	var amb *AmbiguousError
	require.ErrorAs(t, err, &amb)
	require.Equal(t, 2, amb.Count)
	_, err = f.fsm.FindDelivery("77aa00b") // seven characters: too short to guess
	require.True(t, errors.Is(err, ErrNoMatch))
	_, err = f.fsm.FindDelivery("ffffffff")
	require.True(t, errors.Is(err, ErrNoMatch))
}
