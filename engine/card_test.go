package engine

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// A click is recorded once per event; one with a replacement card waits
// for its channel (across a snapshot, which then asks for FSM version 4)
// until a verdict ends it: retryable keeps it waiting, sent ends it
// updated, and a late verdict changes nothing.
func TestCardClickRecordedOnceAndItsUpdateSurvivesASnapshot(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	key := b.planned("follow_up", "wangfang")
	id := DeliveryID(key, "wangfang")
	card := json.RawMessage(`{"msgtype":"template_card","template_card":{"card_type":"button_interaction"}}`)
	click := CardClick{Event: "e1", Key: "done", UserID: "wangfang", At: t0.Add(time.Minute), ResponseCode: "RC1", Update: card,
		UpdateState: CardUpdated, Tries: 7} // what a proposer says of the outcome is not taken
	require.Equal(t, true, b.apply(CmdClickCard, ClickCard{ID: id, Click: click, Now: t0.Add(time.Minute)}))
	require.Equal(t, false, b.apply(CmdClickCard, ClickCard{ID: id, Click: click, Now: t0.Add(2 * time.Minute)}), "WeCom's retry")
	require.Equal(t, false, b.apply(CmdClickCard, ClickCard{ID: "nope", Click: click, Now: t0}))
	require.Equal(t, true, b.apply(CmdClickCard, ClickCard{ID: id, Click: CardClick{Event: "e0", Key: "look", UserID: "lina"}, Now: t0}), "no card: nothing waits")

	d := b.state(id)
	require.Len(t, d.Clicks, 2)
	require.Equal(t, CardUpdatePending, d.Clicks[0].UpdateState)
	require.Zero(t, d.Clicks[0].Tries)
	require.Empty(t, d.Clicks[1].UpdateState)
	pending := b.fsm.CardUpdatesPending()
	require.Len(t, pending, 1)
	require.Equal(t, "e1", pending[0].Click.Event)

	snap, err := b.fsm.Snapshot()
	require.NoError(t, err)
	raw := persist(t, snap)
	require.Contains(t, string(raw[:bytes.IndexByte(raw, '\n')]), `"fsm_version":4`)
	r := setupFSM(t)
	require.NoError(t, r.fsm.Restore(bytes.NewReader(raw)))
	r.index = 100
	require.Len(t, r.fsm.CardUpdatesPending(), 1, "still waiting after a restore")

	require.Equal(t, 1, r.apply(CmdRecordCardUpdates, RecordCardUpdates{Results: []CardUpdateOutcome{{ID: id, Event: "e1", Status: heraldtype.StatusRetryable, Error: "busy"}}, Now: t0.Add(3 * time.Minute)}))
	require.Len(t, r.fsm.CardUpdatesPending(), 1, "retryable: asked again")
	require.Equal(t, 1, r.apply(CmdRecordCardUpdates, RecordCardUpdates{Results: []CardUpdateOutcome{{ID: id, Event: "e1", Status: heraldtype.StatusSent}}, Now: t0.Add(4 * time.Minute)}))
	require.Empty(t, r.fsm.CardUpdatesPending())
	k := r.state(id).Clicks[0]
	require.Equal(t, CardUpdated, k.UpdateState)
	require.Equal(t, 2, k.Tries)
	require.Equal(t, t0.Add(4*time.Minute), k.UpdatedAt)
	require.Equal(t, 0, r.apply(CmdRecordCardUpdates, RecordCardUpdates{Results: []CardUpdateOutcome{{ID: id, Event: "e1", Status: heraldtype.StatusPermanent}}, Now: t0.Add(5 * time.Minute)}), "late")
	require.Equal(t, CardUpdated, r.state(id).Clicks[0].UpdateState)
}

// A retryable verdict the leader gives up on ends failed; a delivery keeps
// its latest MaxClicks clicks, and nothing waits for a click it dropped.
func TestCardClicksBounded(t *testing.T) {
	t.Parallel()
	b := setupFSM(t)
	key := b.planned("follow_up", "wangfang")
	id := DeliveryID(key, "wangfang")
	card := json.RawMessage(`{"msgtype":"template_card","template_card":{}}`)
	require.Equal(t, true, b.apply(CmdClickCard, ClickCard{ID: id, Click: CardClick{Event: "first", Update: card}, Now: t0}))
	require.Equal(t, 1, b.apply(CmdRecordCardUpdates, RecordCardUpdates{Results: []CardUpdateOutcome{{ID: id, Event: "first", Status: heraldtype.StatusRetryable, GiveUp: true}}, Now: t0}))
	require.Equal(t, CardUpdateFailed, b.state(id).Clicks[0].UpdateState)

	for i := range MaxClicks + 1 {
		b.apply(CmdClickCard, ClickCard{ID: id, Click: CardClick{Event: string(rune('a' + i)), Update: card}, Now: t0})
	}
	d := b.state(id)
	require.Len(t, d.Clicks, MaxClicks)
	require.Equal(t, "b", d.Clicks[0].Event, "the oldest two went")
	require.Len(t, b.fsm.CardUpdatesPending(), MaxClicks)
}
