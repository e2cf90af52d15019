package wecom_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

// The key field is what keeps two deliveries with equal content apart
// under WeCom's duplicate check; whether WeCom accepts the unknown field is
// unconfirmed. These tests show both sides of the trade-off (DESIGN.md,
// "Body determinism and duplicates").

func TestKeyFieldKeepsEqualContentApart(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{}, "")
	mon := sendOne(t, e.ch, msg("monday", "alice", text("please fill in your report")))
	tue := sendOne(t, e.ch, msg("tuesday", "alice", text("please fill in your report")))
	require.Equal(t, sdk.StatusSent, mon.Status)
	require.Equal(t, sdk.StatusSent, tue.Status)
	require.NotEqual(t, mon.ProviderID, tue.ProviderID)
	require.Len(t, e.fake.Received("alice"), 2, "two deliveries, two messages")
	require.Empty(t, e.fake.Drops())
}

func TestWithoutKeyFieldEqualContentCollapses(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{}, `,"key_field":"-"`)
	mon := sendOne(t, e.ch, msg("monday", "alice", text("please fill in your report")))
	tue := sendOne(t, e.ch, msg("tuesday", "alice", text("please fill in your report")))
	require.Equal(t, sdk.StatusSent, mon.Status)
	require.Equal(t, sdk.StatusSent, tue.Status, "WeCom says ok to the duplicate")
	require.Len(t, e.fake.Received("alice"), 1, "the price of key_field \"-\": the second delivery is swallowed within the interval")
	drops := e.fake.Drops()
	require.Len(t, drops, 1)
	require.Equal(t, wecomfake.DropDuplicate, drops[0].Reason)
	require.NotContains(t, string(drops[0].Body), "herald_key")
}

func TestKeyFieldRefusedByWeComFailsLoudly(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{UnknownFields: wecomfake.UnknownFieldsReject}, "")
	for _, id := range []string{"a", "b"} {
		r := sendOne(t, e.ch, msg(id, "alice", text("hello")))
		require.Equal(t, sdk.StatusPermanent, r.Status, "%+v", r)
		require.Equal(t, "40058", r.Code)
		require.Contains(t, r.Error, "herald_key")
	}
	require.Empty(t, e.fake.Received("alice"))
	require.Equal(t, 1, strings.Count(e.logs.String(), `set key_field: \"-\"`), "the operator is told what to do, once")

	// The operator's way out.
	fixed := e.channel(t, appConfig(e.api.URL, wecomfake.DemoSecret, `,"key_field":"-"`))
	require.Equal(t, sdk.StatusSent, sendOne(t, fixed, msg("c", "alice", text("hello"))).Status)
	require.Len(t, e.fake.Received("alice"), 1)
}
