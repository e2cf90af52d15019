package rules

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// TestFollowUpCardDone: 已跟进 on the example follow_up's card cancels the
// follow-up's pending tasks (and only those) and replaces the card with
// who handled it and when, in the rule's zone.
func TestFollowUpCardDone(t *testing.T) {
	t.Parallel()
	s := examples(t)
	shanghai, _ := time.LoadLocation("Asia/Shanghai")
	slot := time.Date(2026, 12, 1, 9, 0, 0, 0, shanghai)
	ft := &fakeTasks{tasks: map[string]*engine.Task{
		"follow-8812-2":  {Key: "follow-8812-2", Rule: "follow_up", State: engine.TaskPending},
		"follow-9000-1":  {Key: "follow-9000-1", Rule: "follow_up", State: engine.TaskPending},
		"follow-88120-1": {Key: "follow-88120-1", Rule: "follow_up", State: engine.TaskPending},
	}}
	run := engine.RunContext{Rule: "follow_up", Key: engine.TaskRunKey("follow-8812-1"), Slot: slot,
		Data: json.RawMessage(`{"owner":"wangfang","customer":"华东机电","followup":"8812"}`)}
	d := &engine.Delivery{ID: "d1", Rule: "follow_up", Recipient: "wangfang"}
	at := time.Date(2026, 12, 1, 1, 5, 0, 0, time.UTC) // 09:05 in Shanghai
	card, err := s.OnAction(context.Background(), "follow_up", run, d, engine.CardAction{Key: "done", UserID: "wangfang", At: at, Event: "e1"}, ft.ops())
	require.NoError(t, err)
	require.Equal(t, []string{"cancel follow-8812-2"}, ft.calls)
	tc := payload(t, card)["template_card"].(map[string]any)
	require.Equal(t, "✅ 王芳 已于 12-01 09:05 跟进", tc["sub_title_text"])

	ft.calls = nil
	card, err = s.OnAction(context.Background(), "follow_up", run, d, engine.CardAction{Key: "later", UserID: "wangfang", At: at, Event: "e2"}, ft.ops())
	require.NoError(t, err)
	require.Equal(t, []string{"submit follow-8812-again-d1"}, ft.calls)
	require.Contains(t, string(card), "1 小时后再提醒")

	card, err = s.OnAction(context.Background(), "follow_up", run, d, engine.CardAction{Key: "handled", UserID: "wangfang", At: at}, ft.ops())
	require.NoError(t, err)
	require.Nil(t, card, "the replaced card's button: nothing")
}

// TestOnActionReturnsACard: on_action may return nil or a template_card;
// anything else is the rule's error, and a rule without on_action answers
// nil.
func TestOnActionReturnsACard(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{
		"c.lua": `return rule { name = "c", channel = "mock",
  recipients = function(run) return {} end,
  message = function(run, to) return { msgtype = "text", content = "x" } end,
  on_action = function(run, to, action)
    if action.key == "text" then return { msgtype = "text", content = "no" } end
    return { msgtype = "template_card", template_card = { card_type = "button_interaction", sub_title_text = to.userid .. " " .. action.key } }
  end }`,
		"n.lua": simpleRule("n", `return {}`),
	}))
	d := &engine.Delivery{ID: "d1", Rule: "c", Recipient: "u1"}
	run := engine.RunContext{Rule: "c", Key: "c@x", Slot: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	card, err := s.OnAction(context.Background(), "c", run, d, engine.CardAction{Key: "ok"}, (&fakeTasks{}).ops())
	require.NoError(t, err)
	require.JSONEq(t, `{"msgtype":"template_card","template_card":{"card_type":"button_interaction","sub_title_text":"u1 ok"}}`, string(card))
	_, err = s.OnAction(context.Background(), "c", run, d, engine.CardAction{Key: "text"}, (&fakeTasks{}).ops())
	require.ErrorContains(t, err, "on_action: return nil or a card")
	card, err = s.OnAction(context.Background(), "n", run, d, engine.CardAction{Key: "ok"}, (&fakeTasks{}).ops())
	require.NoError(t, err)
	require.Nil(t, card)
}
