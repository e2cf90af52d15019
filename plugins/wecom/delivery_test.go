package wecom_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

// concurrentSends sends one message to each of n members, each from its own
// goroutine, all released at once.
func concurrentSends(t *testing.T, e *env, n int, tag string) []sdk.Result {
	t.Helper()
	results := make([]sdk.Result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			m := msg(fmt.Sprintf("%s-%d", tag, i), fmt.Sprintf("u%03d", i+1), text(fmt.Sprintf("%s for u%03d", tag, i+1)))
			res, err := e.ch.Send(context.Background(), []sdk.Message{m})
			if err == nil && len(res) == 1 {
				results[i] = res[0]
			}
		})
	}
	close(start)
	wg.Wait()
	return results
}

func TestOneTokenFetchForConcurrentSends(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"revoked by WeCom", "expired"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			e := setup(t, members(200), `,"concurrency":64`)
			require.Equal(t, sdk.StatusSent, sendOne(t, e.ch, msg("warm", "alice", text("warm up"))).Status)
			require.Equal(t, 1, e.fake.Calls("gettoken"))

			if how == "expired" {
				e.clock.Advance(2 * time.Hour) // both sides see the token expired
			} else {
				require.Equal(t, 1, e.fake.RevokeTokens("", 0)) // only WeCom knows
			}
			results := concurrentSends(t, e, 200, "report")
			for i, r := range results {
				require.Equal(t, sdk.StatusSent, r.Status, "message %d: %+v", i, r)
				require.NotEmpty(t, r.ProviderID)
			}
			require.Equal(t, 2, e.fake.Calls("gettoken"), "one fetch for all 200 senders")
			for i := 1; i <= 200; i++ {
				u := fmt.Sprintf("u%03d", i)
				require.Equal(t, []string{"report for " + u}, contents(e.fake, u))
			}
			require.Empty(t, e.fake.Drops())
		})
	}
}

func TestRateLimitedCallsSpendNoAttempt(t *testing.T) {
	t.Parallel()
	e := setup(t, members(100), "")
	require.NoError(t, e.fake.AddFault(wecomfake.Fault{Kind: wecomfake.FaultErrcode, Code: 45009, Probability: 0.3, Path: wecomfake.PathSend}))
	var msgs []sdk.Message
	for i := 1; i <= 100; i++ {
		msgs = append(msgs, msg(fmt.Sprintf("m%d", i), fmt.Sprintf("u%03d", i), text(fmt.Sprintf("daily %d", i))))
	}
	out := newDriver(t, e.ch, e.clock).run(msgs)
	limited := 0
	for _, m := range msgs {
		o := out[m.ID]
		require.Equal(t, sdk.StatusSent, o.result.Status, "%s: %+v", m.ID, o.result)
		require.Equal(t, 1, o.attempts, "%s: a rate limit spends no attempt", m.ID)
		limited += o.rateLimited
		require.Equal(t, []string{"daily " + m.ID[1:]}, contents(e.fake, m.Recipient))
	}
	calls := e.fake.Calls("message/send")
	require.Equal(t, 100+limited, calls, "one call per send, no hidden retries")
	require.Greater(t, limited, 10, "the fault hit")
	require.Less(t, calls, 200, "calls stay bounded")
}

func TestAcceptThenResetDeliversOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, members(50), "")
	require.NoError(t, e.fake.AddFault(wecomfake.Fault{Kind: wecomfake.FaultReset, Probability: 0.1, Path: wecomfake.PathSend}))
	var msgs []sdk.Message
	for round := range 4 {
		for i := 1; i <= 50; i++ {
			u := fmt.Sprintf("u%03d", i)
			msgs = append(msgs, msg(fmt.Sprintf("r%d-%s", round, u), u, text(fmt.Sprintf("round %d", round))))
		}
	}
	d := newDriver(t, e.ch, e.clock)
	info, err := e.ch.Info(context.Background())
	require.NoError(t, err)
	out := d.honourLimits(info.Limits).run(msgs)
	retried := 0
	for _, m := range msgs {
		o := out[m.ID]
		require.Equal(t, sdk.StatusSent, o.result.Status, "%s: %+v", m.ID, o.result)
		retried += o.attempts - 1
	}
	for i := 1; i <= 50; i++ {
		u := fmt.Sprintf("u%03d", i)
		require.ElementsMatch(t, []string{"round 0", "round 1", "round 2", "round 3"}, contents(e.fake, u), "%s got each message exactly once", u)
	}
	dups := 0
	for _, d := range e.fake.Drops() {
		require.Equal(t, wecomfake.DropDuplicate, d.Reason, "no silent limit drops")
		dups++
	}
	require.Greater(t, retried, 5, "resets happened and were retried")
	require.Equal(t, retried, dups, "every retry of a reset send was stopped by WeCom's duplicate check")
}

func TestPerRecipientLimitsAvoidSilentDrops(t *testing.T) {
	t.Parallel()
	burst := func(e *env) ([]sdk.Message, []time.Time) {
		var msgs []sdk.Message
		var due []time.Time
		start := e.clock.Now()
		for i := range 100 {
			msgs = append(msgs, msg(fmt.Sprintf("n%d", i), "alice", text(fmt.Sprintf("note %d", i))))
			due = append(due, start.Add(time.Duration(i)*600*time.Millisecond)) // all due within a minute
		}
		return msgs, due
	}

	// The channel declares WeCom's own numbers; the host's limiter paces
	// to them.
	e := setup(t, wecomfake.Config{}, "")
	info, err := e.ch.Info(context.Background())
	require.NoError(t, err)
	require.Contains(t, info.Limits, sdk.Limit{Scope: sdk.ScopeRecipient, Count: 30, Per: time.Minute})
	require.Contains(t, info.Limits, sdk.Limit{Scope: sdk.ScopeRecipient, Count: 1000, Per: time.Hour})
	msgs, due := burst(e)
	out := newDriver(t, e.ch, e.clock).honourLimits(info.Limits).run(msgs, due...)
	for _, m := range msgs {
		require.Equal(t, sdk.StatusSent, out[m.ID].result.Status)
	}
	require.Empty(t, e.fake.Drops(), "no message was dropped silently")
	got := contents(e.fake, "alice")
	require.Len(t, got, 100, "all arrive")
	for i, c := range got {
		require.Equal(t, fmt.Sprintf("note %d", i), c, "in order")
	}

	// Control: plain token buckets at the same numbers let bursts through
	// that WeCom drops without a word, which is why the host reads a limit
	// as a sliding window.
	naive := setup(t, wecomfake.Config{}, "")
	msgs, due = burst(naive)
	newDriver(t, naive.ch, naive.clock).naiveBuckets(info.Limits).run(msgs, due...)
	require.NotEmpty(t, naive.fake.Drops())
	require.Less(t, len(naive.fake.Received("alice")), 100)
}

func TestWrongSecretIsConfigAndDoesNotHammer(t *testing.T) {
	t.Parallel()
	e := setup(t, members(20), "")
	bad := e.channel(t, appConfig(e.api.URL, "not-the-secret", `,"config_hold":"10m"`))
	var msgs []sdk.Message
	for i := 1; i <= 20; i++ {
		msgs = append(msgs, msg(fmt.Sprintf("w%d", i), fmt.Sprintf("u%03d", i), text("hello")))
	}
	d := newDriver(t, bad, e.clock)
	d.batchSize = 5
	out := d.run(msgs)
	for _, m := range msgs {
		r := out[m.ID].result
		require.Equal(t, sdk.StatusConfig, r.Status, "%+v", r)
		require.Equal(t, "40001", r.Code)
		require.NotContains(t, r.Error, "not-the-secret")
	}
	require.Equal(t, 1, e.fake.Calls("gettoken"), "one gettoken for four batches")
	require.Zero(t, e.fake.Calls("message/send"))
	require.Empty(t, e.fake.Messages(), "nothing sent")
	require.ErrorContains(t, bad.Health(context.Background()), "40001")

	// After the hold it tries once more, then holds again.
	e.clock.Advance(11 * time.Minute)
	out = newDriver(t, bad, e.clock).run(msgs[:5])
	require.Equal(t, sdk.StatusConfig, out[msgs[0].ID].result.Status)
	require.Equal(t, 2, e.fake.Calls("gettoken"))
	require.NotContains(t, e.logs.String(), "not-the-secret")

	// Reconfiguring with the right secret clears the latched failure.
	require.NoError(t, bad.Configure(context.Background(), []byte(appConfig(e.api.URL, wecomfake.DemoSecret, ""))))
	require.Equal(t, sdk.StatusSent, sendOne(t, bad, msg("fixed", "u001", text("hello"))).Status)
	require.NoError(t, bad.Health(context.Background()))
}

func TestInvalidRecipients(t *testing.T) {
	t.Parallel()
	cfg := members(0)
	cfg.Corps[0].Members = append(cfg.Corps[0].Members,
		wecomfake.MemberConfig{UserID: "hidden", Hidden: true},
		wecomfake.MemberConfig{UserID: "nolicence", Unlicensed: true})
	e := setup(t, cfg, "")

	batch := []sdk.Message{
		msg("a", "Alice", text("hi")), msg("g1", "ghost1", text("hi")),
		msg("b", "bob", text("hi")), msg("h", "hidden", text("hi")), msg("n", "nolicence", text("hi")),
	}
	res, err := e.ch.Send(context.Background(), batch)
	require.NoError(t, err)
	byID := map[string]sdk.Result{}
	for _, r := range res {
		byID[r.ID] = r
	}
	require.Equal(t, sdk.StatusSent, byID["a"].Status, "userids match case-insensitively")
	require.Equal(t, sdk.StatusSent, byID["b"].Status)
	for _, id := range []string{"g1", "h"} {
		require.Equal(t, sdk.StatusPermanent, byID[id].Status, id)
		require.Equal(t, "81013", byID[id].Code, id)
	}
	require.Equal(t, sdk.StatusPermanent, byID["n"].Status)
	require.Contains(t, byID["n"].Error, "unlicenseduser")
	require.Len(t, e.fake.Received("alice"), 1)
	require.Len(t, e.fake.Received("bob"), 1)
	require.Empty(t, e.fake.Received("nolicence"))

	res, err = e.ch.Send(context.Background(), []sdk.Message{msg("x", "nobody", text("hi")), msg("y", "noone", text("hi"))})
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, sdk.StatusPermanent, r.Status)
		require.Equal(t, "81013", r.Code)
		require.Contains(t, r.Error, "user & party & tag all invalid")
	}
}
