package wecom_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

func buttonCard(title string, extra map[string]any) json.RawMessage {
	card := map[string]any{"card_type": "button_interaction", "main_title": map[string]string{"title": title},
		"button_list": []map[string]any{{"text": "已跟进", "key": "done"}}}
	for k, v := range extra {
		card[k] = v
	}
	b, _ := json.Marshal(map[string]any{"msgtype": "template_card", "template_card": card})
	return b
}

// An interactive card goes out with the delivery id as its task_id (a
// rule's own task_id is refused), and is replaced once through
// update_template_card with a response_code; the code's second use and a
// robot's card are refused.
func TestInteractiveCardTaskIDAndUpdate(t *testing.T) {
	t.Parallel()
	e := setup(t, members(0), "")
	res := sendOne(t, e.ch, msg("d1", "alice", buttonCard("跟进提醒", nil)))
	require.Equal(t, sdk.StatusSent, res.Status, res.Error)
	ms := e.fake.Messages()
	require.Len(t, ms, 1)
	require.Equal(t, "d1", ms[0].TaskID, "task_id is the delivery id")

	own := sendOne(t, e.ch, msg("d2", "alice", buttonCard("x", map[string]any{"task_id": "mine"})))
	require.Equal(t, sdk.StatusPermanent, own.Status)
	require.Contains(t, own.Error, "task_id is set by Herald")

	code := "rc_" + res.ProviderID // the fake's send answer for a card
	upd := sdk.CardUpdate{ID: "d1", Recipient: "alice", ResponseCode: code, Payload: buttonCard("✅ 已跟进", nil)}
	out, err := e.ch.UpdateCards(context.Background(), []sdk.CardUpdate{upd})
	require.NoError(t, err)
	require.Equal(t, sdk.StatusSent, out[0].Status, out[0].Error)
	ms = e.fake.Messages()
	require.Contains(t, string(ms[0].Updated), "✅ 已跟进")
	require.Contains(t, string(ms[0].Updated), `"task_id":"d1"`)
	require.Equal(t, 1, e.fake.Calls(wecomfake.PathCard))

	out, err = e.ch.UpdateCards(context.Background(), []sdk.CardUpdate{upd, {ID: "d3", Recipient: "alice", ResponseCode: code, Payload: text("no")}})
	require.NoError(t, err)
	require.Equal(t, sdk.StatusPermanent, out[0].Status)
	require.Equal(t, "40058", out[0].Code, "a response_code is used once")
	require.Equal(t, sdk.StatusPermanent, out[1].Status)
	require.Contains(t, out[1].Error, "not text")

	robot := e.channel(t, robotConfig(e.api.URL, wecomfake.DemoRobotKey, ""))
	out, err = robot.UpdateCards(context.Background(), []sdk.CardUpdate{upd})
	require.NoError(t, err)
	require.Equal(t, sdk.StatusPermanent, out[0].Status)
	require.Contains(t, out[0].Error, "robot")
}
