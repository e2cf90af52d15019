package wecom_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/plugins/sdk"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

func TestOutcomeTable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		code   int
		status sdk.Status
	}{
		{-1, sdk.StatusRetryable},
		{45033, sdk.StatusRateLimited},
		{45009, sdk.StatusRateLimited},
		{81013, sdk.StatusPermanent},
		{40003, sdk.StatusPermanent},
		{60021, sdk.StatusPermanent},
		{40008, sdk.StatusPermanent},
		{40032, sdk.StatusPermanent},
		{40058, sdk.StatusPermanent},
		{44004, sdk.StatusPermanent},
		{45002, sdk.StatusPermanent},
		{82001, sdk.StatusPermanent},
		{82004, sdk.StatusPermanent},
		{41001, sdk.StatusPermanent}, // the channel's own bug: unknown, permanent
		{99999, sdk.StatusPermanent},
		{40056, sdk.StatusConfig},
		{41011, sdk.StatusConfig},
		{301002, sdk.StatusConfig},
		{50003, sdk.StatusConfig},
		{60020, sdk.StatusConfig},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.code), func(t *testing.T) {
			t.Parallel()
			e := setup(t, wecomfake.Config{}, "")
			require.NoError(t, e.fake.FailNext(1, c.code, "message/send"))
			r := sendOne(t, e.ch, msg("m", "alice", text("hi")))
			require.Equal(t, c.status, r.Status, "%+v", r)
			require.Equal(t, fmt.Sprint(c.code), r.Code, "errcode kept verbatim")
			require.Equal(t, wecomfake.ErrText(c.code), strings.SplitN(r.Error, ", hint:", 2)[0], "errmsg kept verbatim")
			require.Contains(t, r.Error, "more info at")
			switch c.code {
			case 45009:
				require.GreaterOrEqual(t, r.RetryAfter, time.Minute)
			case 45033:
				require.Positive(t, r.RetryAfter)
			}
			require.Equal(t, 1, e.fake.Calls("message/send"), "no retry inside the channel")
			if c.status == sdk.StatusConfig {
				// A configuration failure is latched: the next send fails at once.
				r2 := sendOne(t, e.ch, msg("m2", "bob", text("hi")))
				require.Equal(t, sdk.StatusConfig, r2.Status)
				require.Equal(t, r.Code, r2.Code)
				require.Equal(t, 1, e.fake.Calls("message/send"))
			}
		})
	}
}

func TestTransportFailuresAreRetryable(t *testing.T) {
	t.Parallel()
	faults := []wecomfake.Fault{
		{Kind: wecomfake.FaultHTTP, Code: 502},
		{Kind: wecomfake.FaultHTTP, Code: 503},
		{Kind: wecomfake.FaultMalformed},
		{Kind: wecomfake.FaultReset},
		{Kind: wecomfake.FaultAbort},
	}
	for _, f := range faults {
		t.Run(fmt.Sprintf("%s%d", f.Kind, f.Code), func(t *testing.T) {
			t.Parallel()
			e := setup(t, wecomfake.Config{}, "")
			f.Count, f.Path = 1, wecomfake.PathSend
			require.NoError(t, e.fake.AddFault(f))
			m := msg("m", "alice", text("hi"))
			r := sendOne(t, e.ch, m)
			require.Equal(t, sdk.StatusRetryable, r.Status, "%+v", r)
			require.NotEmpty(t, r.Error)
			require.Empty(t, r.Code, "no errcode for a transport failure")
			// The retry goes out byte-identical; for a reset the first one
			// was delivered, and WeCom's duplicate check keeps it single.
			m.Attempt = 2
			require.Equal(t, sdk.StatusSent, sendOne(t, e.ch, m).Status)
			calls := e.fake.Requests()
			var bodies [][]byte
			for _, c := range calls {
				if c.Path == wecomfake.PathSend {
					bodies = append(bodies, c.Body)
				}
			}
			require.Len(t, bodies, 2)
			require.Equal(t, bodies[0], bodies[1])
			require.Len(t, e.fake.Received("alice"), 1)
		})
	}
}

func TestTimeoutIsRetryable(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{}, "")
	require.Equal(t, sdk.StatusSent, sendOne(t, e.ch, msg("warm", "bob", text("warm"))).Status)
	ch := e.channel(t, appConfig(e.api.URL, wecomfake.DemoSecret, `,"timeout":"50ms"`))
	e.fake.SetLatency(time.Second)
	r := sendOne(t, ch, msg("m", "alice", text("hi")))
	require.Equal(t, sdk.StatusRetryable, r.Status, "%+v", r)
	require.Contains(t, r.Error, "timeout")
}

func TestTokenRejectedRefreshesOnceAndRetriesOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{}, "")
	require.Equal(t, sdk.StatusSent, sendOne(t, e.ch, msg("warm", "bob", text("warm"))).Status)

	require.NoError(t, e.fake.FailNext(1, 42001, "message/send"))
	r := sendOne(t, e.ch, msg("a", "alice", text("one")))
	require.Equal(t, sdk.StatusSent, r.Status, "%+v", r)
	require.Equal(t, 2, e.fake.Calls("gettoken"))
	require.Equal(t, 3, e.fake.Calls("message/send"))

	// Rejected again after the refresh: give up for now, no third call.
	require.NoError(t, e.fake.FailNext(2, 40014, "message/send"))
	r = sendOne(t, e.ch, msg("b", "alice", text("two")))
	require.Equal(t, sdk.StatusRetryable, r.Status, "%+v", r)
	require.Equal(t, "40014", r.Code)
	require.Equal(t, 3, e.fake.Calls("gettoken"))
	require.Equal(t, 5, e.fake.Calls("message/send"))
	require.Equal(t, []string{"one"}, contents(e.fake, "alice"))
}

func TestTokenFetchFailureIsBounded(t *testing.T) {
	t.Parallel()
	e := setup(t, members(30), "")
	require.NoError(t, e.fake.AddFault(wecomfake.Fault{Kind: wecomfake.FaultErrcode, Code: -1, Path: wecomfake.PathGetToken}))
	var batch []sdk.Message
	for i := 1; i <= 30; i++ {
		batch = append(batch, msg(fmt.Sprint(i), fmt.Sprintf("u%03d", i), text("hi")))
	}
	res, err := e.ch.Send(context.Background(), batch)
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, sdk.StatusRetryable, r.Status)
		require.Equal(t, "-1", r.Code)
	}
	require.Equal(t, 1, e.fake.Calls("gettoken"), "a sick gettoken is asked once per batch, not per message")

	e.fake.ClearFaults()
	e.clock.Advance(time.Minute)
	res, err = e.ch.Send(context.Background(), batch)
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, sdk.StatusSent, r.Status)
	}
}

func TestPartialInvalidInSuccessReply(t *testing.T) {
	t.Parallel()
	// WeCom lists recipients it could not deliver to even when errcode is 0;
	// the fake answers 81013 for a single invalid user, so a stub plays it.
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/cgi-bin/gettoken" {
			fmt.Fprint(w, `{"errcode":0,"errmsg":"ok","access_token":"t","expires_in":7200}`)
			return
		}
		fmt.Fprint(w, `{"errcode":0,"errmsg":"ok","invaliduser":"carol","invalidparty":"","invalidtag":"","unlicenseduser":"","msgid":"m1"}`)
	}))
	t.Cleanup(stub.Close)
	e := setup(t, wecomfake.Config{}, "")
	ch := e.channel(t, appConfig(stub.URL, "s", ""))
	r := sendOne(t, ch, msg("c", "Carol", text("hi")))
	require.Equal(t, sdk.StatusPermanent, r.Status)
	require.Contains(t, r.Error, "invaliduser=carol")
	r = sendOne(t, ch, msg("d", "dave", text("hi")))
	require.Equal(t, sdk.StatusSent, r.Status)
	require.Equal(t, "m1", r.ProviderID)
}

func TestCongestionLowersConcurrency(t *testing.T) {
	t.Parallel()
	e := setup(t, members(40), "")
	// Count the sends in flight as each one starts.
	var mu sync.Mutex
	inflight := 0
	var seen []int
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wecomfake.PathSend {
			mu.Lock()
			inflight++
			seen = append(seen, inflight)
			mu.Unlock()
			defer func() { mu.Lock(); inflight--; mu.Unlock() }()
		}
		e.fake.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(counting.Close)
	ch := e.channel(t, appConfig(counting.URL, wecomfake.DemoSecret, `,"concurrency":8`))
	require.Equal(t, sdk.StatusSent, sendOne(t, ch, msg("warm", "alice", text("warm"))).Status)
	e.fake.SetLatency(5 * time.Millisecond)
	require.NoError(t, e.fake.FailNext(1, 45033, "message/send"))
	var batch []sdk.Message
	for i := 1; i <= 40; i++ {
		batch = append(batch, msg(fmt.Sprint(i), fmt.Sprintf("u%03d", i), text("hi")))
	}
	res, err := ch.Send(context.Background(), batch)
	require.NoError(t, err)
	congested := 0
	for _, r := range res {
		if r.Code == "45033" {
			congested++
			require.Equal(t, sdk.StatusRateLimited, r.Status)
			continue
		}
		require.Equal(t, sdk.StatusSent, r.Status)
	}
	require.Equal(t, 1, congested)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 41)
	require.Greater(t, slices.Max(seen[1:9]), 1, "the batch starts concurrent")
	// Sends that chose their weight before the 45033 was seen may still
	// overlap (at most two rounds of the concurrency); every later one runs
	// alone.
	for i, n := range seen[20:] {
		require.Equal(t, 1, n, "send %d after the 45033 ran alone", i+20)
	}
}

// TestOutcomeTableOtherCalls covers the rows of WECOM.md's table that come
// from gettoken and from a robot's webhook/send, and the send codes
// TestOutcomeTable leaves out.
func TestOutcomeTableOtherCalls(t *testing.T) {
	t.Parallel()
	cases := []struct {
		path   string // where the code is answered
		code   int
		status sdk.Status
	}{
		{wecomfake.PathGetToken, 40001, sdk.StatusConfig},
		{wecomfake.PathGetToken, 40013, sdk.StatusConfig},
		{wecomfake.PathGetToken, 40091, sdk.StatusConfig},
		{wecomfake.PathGetToken, 41002, sdk.StatusConfig},
		{wecomfake.PathGetToken, 41004, sdk.StatusConfig},
		{wecomfake.PathGetToken, -1, sdk.StatusRetryable},
		{wecomfake.PathGetToken, 45009, sdk.StatusRateLimited},
		{wecomfake.PathSend, 82002, sdk.StatusPermanent},
		{wecomfake.PathSend, 82003, sdk.StatusPermanent},
		{wecomfake.PathWebhook, 93000, sdk.StatusConfig},
		{wecomfake.PathWebhook, 93004, sdk.StatusConfig},
		{wecomfake.PathWebhook, 45009, sdk.StatusRateLimited},
		{wecomfake.PathWebhook, 40058, sdk.StatusPermanent},
		{wecomfake.PathWebhook, 44004, sdk.StatusPermanent},
		{wecomfake.PathWebhook, -1, sdk.StatusRetryable},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.path, c.code), func(t *testing.T) {
			t.Parallel()
			e := setup(t, wecomfake.Config{}, "")
			ch := e.ch
			if c.path == wecomfake.PathWebhook {
				ch = e.channel(t, robotConfig(e.api.URL, wecomfake.DemoRobotKey, ""))
			}
			require.NoError(t, e.fake.FailNext(1, c.code, c.path))
			r := sendOne(t, ch, msg("m", "alice", text("hi")))
			require.Equal(t, c.status, r.Status, "%+v", r)
			require.Equal(t, fmt.Sprint(c.code), r.Code, "errcode kept verbatim")
			require.Contains(t, r.Error, wecomfake.ErrText(c.code), "errmsg kept")
			if c.status == sdk.StatusRateLimited {
				require.GreaterOrEqual(t, r.RetryAfter, time.Minute)
			}
			require.Empty(t, e.fake.Messages())
			require.Empty(t, e.fake.RobotReceived(wecomfake.DemoRobotKey))
		})
	}
}

// 45033 says Herald made too many calls at once, not that the message is
// at fault, and WECOM.md says to retry it soon. As Retryable it spent an
// attempt (a rule with retry off failed for good), and the engine waited
// its own backoff, a minute at least, whatever RetryAfter said. As
// RateLimited it goes again after the 2–4 s asked, spending nothing.
func TestCongestionSpendsNoAttempt(t *testing.T) {
	t.Parallel()
	e := setup(t, wecomfake.Config{}, "")
	require.NoError(t, e.fake.FailNext(1, 45033, wecomfake.PathSend))
	r := sendOne(t, e.ch, msg("m", "alice", text("hi")))
	require.Equal(t, sdk.StatusRateLimited, r.Status, "%+v", r)
	require.Equal(t, "45033", r.Code)
	require.GreaterOrEqual(t, r.RetryAfter, 2*time.Second)
	require.Less(t, r.RetryAfter, 4*time.Second)
}
