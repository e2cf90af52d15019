package wecom_test

import (
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
