package wecom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
	"github.com/heraldhq/herald/plugins/wecom"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

const secret = "s3cret-value-that-must-never-show"

func TestConfigureRefusesBadConfig(t *testing.T) {
	t.Parallel()
	bad := map[string]string{
		`{`:  "bad config",
		`{}`: "set corp_id, agent_id and secret",
		`{"corp_id":"c","agent_id":1,"secret":"` + secret + `","robot_key":"k"}`: "not both",
		`{"corp_id":"c","secret":"` + secret + `"}`:                              "needs agent_id",
		`{"corp_id":"c","agent_id":"x","secret":"` + secret + `"}`:               "agent_id",
		`{"corp_id":"c","agent_id":0,"secret":"` + secret + `"}`:                 "positive",
		`{"robot_key":"k","base_url":"ftp://x"}`:                                 "base_url",
		`{"robot_key":"k","timeout":"soon"}`:                                     "duration",
		`{"robot_key":"k","duplicate_check_interval":"5h"}`:                      "1s..4h",
		`{"robot_key":"k","concurrency":-1}`:                                     "negative",
		`{"robot_key":"k","key_field":"touser"}`:                                 "key_field",
		`{"robot_key":"k","secert":"` + secret + `"}`:                            "unknown field",
		`{"corp_id":"c","agent_id":1,"secret":"` + secret + `"} x`:               "trailing",
	}
	ch := wecom.New()
	for cfg, want := range bad {
		err := ch.Configure(context.Background(), json.RawMessage(cfg))
		require.ErrorIs(t, err, wecom.ErrBadConfig, cfg)
		require.Contains(t, err.Error(), want, cfg)
		require.NotContains(t, err.Error(), secret, "errors never quote the secret")
	}
	_, err := ch.Send(context.Background(), []sdk.Message{msg("m", "alice", text("x"))})
	require.ErrorIs(t, err, wecom.ErrNotConfigured)

	for _, good := range []string{
		`{"corp_id":"c","agent_id":"1000002","secret":"x","timeout":5,"duplicate_check_interval":3600}`,
		`{"robot_key":"k","timeout":"2s","duplicate_check_interval":"4h","channel":"ops"}`,
	} {
		require.NoError(t, ch.Configure(context.Background(), json.RawMessage(good)), good)
	}
}

func TestInfoDeclaresLimits(t *testing.T) {
	t.Parallel()
	ch := wecom.New()
	before, err := ch.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, "wecom", before.Name)
	require.Equal(t, wecom.Version, before.Version)
	require.NoError(t, ch.Configure(context.Background(), json.RawMessage(`{"corp_id":"c","agent_id":1,"secret":"`+secret+`","calls_per_second":20}`)))
	info, err := ch.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, []sdk.Limit{
		{Scope: sdk.ScopeRecipient, Count: 30, Per: time.Minute},
		{Scope: sdk.ScopeRecipient, Count: 1000, Per: time.Hour},
		{Scope: sdk.ScopeChannel, Count: 20, Per: time.Second},
	}, info.Limits)
	require.NotContains(t, fmt.Sprintf("%+v", info), secret)
}

// TestSecretsNeverShow provokes every failure path with credentials in the
// URL and checks results and logs for the secret, the token and the key.
func TestSecretsNeverShow(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{}, "")
	var results []sdk.Result
	collect := func(ch *wecom.Channel, id string) {
		results = append(results, sendOne(t, ch, msg(id, "alice", text("x"))))
	}

	// Nothing listens here: connection refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	collect(e.channel(t, appConfig(dead, secret, "")), "refused-app")
	collect(e.channel(t, robotConfig(dead, secret, "")), "refused-robot")

	// A wrong secret, a robot key WeCom does not know, transport faults.
	collect(e.channel(t, appConfig(e.api.URL, secret, "")), "wrong-secret")
	collect(e.channel(t, robotConfig(e.api.URL, secret, "")), "unknown-key")
	for _, f := range []wecomfake.FaultKind{wecomfake.FaultReset, wecomfake.FaultMalformed, wecomfake.FaultHTTP} {
		require.NoError(t, e.fake.AddFault(wecomfake.Fault{Kind: f, Count: 1, Path: wecomfake.PathSend}))
		collect(e.ch, string(f))
	}
	token := e.fake.Token(wecomfake.DemoCorpID, wecomfake.DemoAgentID)
	require.NotEmpty(t, token)
	for _, r := range results {
		require.NotEqual(t, sdk.StatusSent, r.Status, "%+v", r)
		for _, s := range []string{secret, token, wecomfake.DemoSecret} {
			require.NotContains(t, r.Error, s, "%+v", r)
		}
	}
	logs := e.logs.String()
	require.NotEmpty(t, logs)
	for _, s := range []string{secret, token, wecomfake.DemoSecret} {
		require.NotContains(t, logs, s)
	}
	require.True(t, strings.Contains(logs, "refused"), "the logs still say what happened")
}
