package wecom_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

// An app message is recalled through message/recall (the fake marks it);
// one past 24 h and a robot's are refused without a call.
func TestRecallAppAndRobot(t *testing.T) {
	t.Parallel()
	e := setup(t, members(0), "")
	res := sendOne(t, e.ch, msg("d1", "alice", text("wrong report")))
	require.Equal(t, sdk.StatusSent, res.Status)
	sentAt := e.clock.Now()
	out, err := e.ch.Recall(context.Background(), []sdk.RecallMessage{
		{ID: "d1", ProviderID: res.ProviderID, Recipient: "alice", SentAt: sentAt},
		{ID: "old", ProviderID: "x", Recipient: "alice", SentAt: sentAt.Add(-25 * time.Hour)},
		{ID: "other", ProviderID: "not-ours", Recipient: "alice", SentAt: sentAt},
	})
	require.NoError(t, err)
	require.Equal(t, sdk.RecallDone, out[0].Status, out[0].Error)
	require.Equal(t, sdk.RecallNotRecallable, out[1].Status)
	require.Equal(t, "42052", out[1].Code)
	require.Equal(t, sdk.RecallNotRecallable, out[2].Status)
	require.Equal(t, "40058", out[2].Code, "another app's msgid")
	require.Equal(t, []string{res.ProviderID}, e.fake.Recalled())
	require.Equal(t, 2, e.fake.Calls(wecomfake.PathRecall), "the old one cost no call")

	robot := e.channel(t, robotConfig(e.api.URL, wecomfake.DemoRobotKey, ""))
	out, err = robot.Recall(context.Background(), []sdk.RecallMessage{{ID: "r1", Recipient: "group", SentAt: sentAt}})
	require.NoError(t, err)
	require.Equal(t, sdk.RecallNotRecallable, out[0].Status)
	require.Contains(t, out[0].Error, "robot")
}
