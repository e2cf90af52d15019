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

// WeCom hands out the same token again while it is valid, with the time
// it has left. The channel's early refresh, five minutes before expiry,
// got it back with 300 s left and refreshed again a tenth of that before
// the end, and again: four gettokens in the token's last five minutes, the
// last answering expires_in 0, which the channel took for "two hours", so
// the next send met 42001. Once a refresh returns the token in hand, the
// channel keeps it to its expiry and fetches once more then.
func TestStickyTokenIsRefreshedOncePerLifetime(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{TokenMode: wecomfake.TokenSticky}, "")
	require.Equal(t, sdk.StatusSent, sendOne(t, e.ch, msg("warm", "alice", text("warm"))).Status)
	e.clock.Advance(wecomfake.TokenLifetimeDefault - 310*time.Second)
	for i := range 3200 { // every 100 ms over the token's last 5 minutes and 10 s past it
		r := sendOne(t, e.ch, msg(fmt.Sprint(i), "alice", text(fmt.Sprint(i))))
		require.Equal(t, sdk.StatusSent, r.Status, "%d: %+v", i, r)
		e.clock.Advance(100 * time.Millisecond)
	}
	rejected := 0
	for _, c := range e.fake.Requests() {
		if c.Errcode == 42001 || c.Errcode == 40014 {
			rejected++
		}
	}
	require.Zero(t, rejected, "no send met an expired token")
	require.Equal(t, 3, e.fake.Calls("gettoken"), "the first, the early refresh, the new token at expiry")
}
