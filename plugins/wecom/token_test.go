package wecom_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

// TestFailedEarlyRefreshKeepsTheValidToken: the channel refreshes its token
// a little before it expires. If gettoken is sick just then, the token in
// hand still works and sends go on with it; only when it has expired do
// sends fail.
func TestFailedEarlyRefreshKeepsTheValidToken(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{}, "")
	require.Equal(t, sdk.StatusSent, sendOne(t, e.ch, msg("warm", "alice", text("warm"))).Status)
	require.Equal(t, 1, e.fake.Calls("gettoken"))

	// Past the channel's refresh point (5 minutes early), before expiry.
	e.clock.Advance(wecomfake.TokenLifetimeDefault - 2*time.Minute)
	require.NoError(t, e.fake.AddFault(wecomfake.Fault{Kind: wecomfake.FaultErrcode, Code: -1, Path: wecomfake.PathGetToken}))
	r := sendOne(t, e.ch, msg("a", "alice", text("one")))
	require.Equal(t, sdk.StatusSent, r.Status, "%+v", r)
	require.Equal(t, 2, e.fake.Calls("gettoken"), "the refresh was tried")
	r = sendOne(t, e.ch, msg("b", "alice", text("two")))
	require.Equal(t, sdk.StatusSent, r.Status, "%+v", r)
	require.Equal(t, 2, e.fake.Calls("gettoken"), "and is not hammered")

	e.clock.Advance(10 * time.Second)
	r = sendOne(t, e.ch, msg("c", "alice", text("three")))
	require.Equal(t, sdk.StatusSent, r.Status, "%+v", r)
	require.Equal(t, 3, e.fake.Calls("gettoken"), "tried again after the hold")

	// Expired, and gettoken still sick: now sends fail, retryable.
	e.clock.Advance(2 * time.Minute)
	r = sendOne(t, e.ch, msg("d", "alice", text("four")))
	require.Equal(t, sdk.StatusRetryable, r.Status, "%+v", r)
	require.Equal(t, "-1", r.Code)
	require.Equal(t, []string{"warm", "one", "two", "three"}, contents(e.fake, "alice"))
}

// A gettoken that fails with a code the channel does not know (48002, API
// forbidden, say) or one of a malformed request says nothing about the
// messages: they never reached message/send. They used to be judged like
// a send's unknown code, Permanent, so one odd gettoken answer failed a
// whole batch for good, and every send for the next 5 s. They are
// Retryable, with WeCom's code and text, and gettoken is still asked once.
func TestUnknownTokenErrorDoesNotFailMessagesForGood(t *testing.T) {
	t.Parallel()
	for _, code := range []int{48002, 40058} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			e := setup(t, members(3), "")
			require.NoError(t, e.fake.FailNext(1, code, wecomfake.PathGetToken))
			var batch []sdk.Message
			for i := 1; i <= 3; i++ {
				batch = append(batch, msg(fmt.Sprint(i), fmt.Sprintf("u%03d", i), text("hi")))
			}
			res, err := e.ch.Send(context.Background(), batch)
			require.NoError(t, err)
			for _, r := range res {
				require.Equal(t, sdk.StatusRetryable, r.Status, "%+v", r)
				require.Equal(t, fmt.Sprint(code), r.Code)
				require.Contains(t, r.Error, wecomfake.ErrText(code))
			}
			require.Equal(t, 1, e.fake.Calls("gettoken"))

			e.clock.Advance(10 * time.Second)
			res, err = e.ch.Send(context.Background(), batch)
			require.NoError(t, err)
			for _, r := range res {
				require.Equal(t, sdk.StatusSent, r.Status, "%+v", r)
			}
		})
	}
}
