package wecom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/plugins/host"
	"github.com/heraldhq/herald/plugins/sdk"
	"github.com/heraldhq/herald/plugins/wecom"
	"github.com/heraldhq/herald/plugins/wecomfake"
)

// forwardClock is a manual clock shared by the channel, the fake and the
// driver. Unlike enginetest.Clock it never goes back: Set to an earlier
// time changes nothing, so the driver and a test may both move it.
type forwardClock struct {
	mu sync.Mutex
	t  time.Time
}

func newForwardClock() *forwardClock {
	return &forwardClock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
}

func (c *forwardClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *forwardClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *forwardClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}

// env is a fake WeCom on loopback and a channel pointed at it, on one clock.
type env struct {
	clock *forwardClock
	fake  *wecomfake.Server
	api   *httptest.Server
	ch    *wecom.Channel
	logs  *enginetest.Buffer
}

// members makes a corp config with the demo app, a robot, and n members
// u001…, plus alice and bob.
func members(n int) wecomfake.Config {
	c := wecomfake.DemoCorp()
	for i := 1; i <= n; i++ {
		c.Members = append(c.Members, wecomfake.MemberConfig{UserID: fmt.Sprintf("u%03d", i)})
	}
	return wecomfake.Config{Corps: []wecomfake.CorpConfig{c}}
}

// setup starts the fake and a channel configured for the demo app (extra
// is spliced into the channel's JSON config).
func setup(t testing.TB, cfg wecomfake.Config, extra string) *env {
	t.Helper()
	e := fakeOnly(t, cfg)
	e.ch = e.channel(t, appConfig(e.api.URL, wecomfake.DemoSecret, extra))
	return e
}

// fakeOnly starts the fake on loopback, on a manual clock, without a
// channel.
func fakeOnly(t testing.TB, cfg wecomfake.Config) *env {
	t.Helper()
	e := &env{clock: newForwardClock(), logs: &enginetest.Buffer{}}
	cfg.NowFunc = e.clock.Now
	e.fake = wecomfake.New(cfg)
	e.api = httptest.NewServer(e.fake.Handler())
	t.Cleanup(e.api.Close)
	return e
}

func appConfig(base, secret, extra string) string {
	return fmt.Sprintf(`{"base_url":%q,"corp_id":%q,"agent_id":%d,"secret":%q,"channel":"wecom_test"%s}`,
		base, wecomfake.DemoCorpID, wecomfake.DemoAgentID, secret, extra)
}

func robotConfig(base, key, extra string) string {
	return fmt.Sprintf(`{"base_url":%q,"robot_key":%q%s}`, base, key, extra)
}

// channel makes another channel on the env's clock with its own HTTP
// client, configured with cfg.
func (e *env) channel(t testing.TB, cfg string) *wecom.Channel {
	t.Helper()
	ch := wecom.New()
	ch.NowFunc = e.clock.Now
	ch.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	ch.HTTPClient = &http.Client{Transport: tr}
	t.Cleanup(tr.CloseIdleConnections)
	require.NoError(t, ch.Configure(context.Background(), json.RawMessage(cfg)))
	return ch
}

func text(content string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"msgtype": "text", "text": map[string]string{"content": content}})
	return b
}

func msg(id, to string, payload json.RawMessage) sdk.Message {
	return sdk.Message{ID: id, IdempotencyKey: "key-" + id, Recipient: to, Payload: payload, Attempt: 1}
}

func sendOne(t *testing.T, ch sdk.Channel, m sdk.Message) sdk.Result {
	t.Helper()
	res, err := ch.Send(context.Background(), []sdk.Message{m})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, m.ID, res[0].ID)
	return res[0]
}

// contents lists what a member received, in order.
func contents(f *wecomfake.Server, userID string) []string {
	var out []string
	for _, m := range f.Received(userID) {
		out = append(out, m.Content)
	}
	return out
}

// driver honours Results the way the executor does: sent, permanent and
// config are final; retryable waits its backoff step (attempt spent);
// rate limited waits RetryAfter (no attempt spent). Time is the injected
// clock: when nothing is due the driver jumps to the next due time. It may
// ask an admission function first, as the executor asks the host.
type driver struct {
	t         *testing.T
	ch        sdk.Channel
	clock     *forwardClock
	batchSize int
	backoff   []time.Duration
	admit     func(recipient string, now time.Time) time.Duration
}

// outcome is a message's end.
type outcome struct {
	result      sdk.Result
	attempts    int // attempts spent (rate-limited sends do not count)
	rateLimited int // times it waited for a rate limit
}

func newDriver(t *testing.T, ch sdk.Channel, c *forwardClock) *driver {
	return &driver{
		t: t, ch: ch, clock: c, batchSize: 20,
		backoff: []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute},
		admit:   func(string, time.Time) time.Duration { return 0 },
	}
}

// honourLimits makes the driver keep to limits as the host does: the
// host's own Limiter, with its default high reserve, normal priority.
func (d *driver) honourLimits(limits []sdk.Limit) *driver {
	l := host.NewLimiter(limits, host.DefaultHighReserve, 0)
	d.admit = func(recipient string, now time.Time) time.Duration {
		return l.Admit(recipient, heraldtype.PriorityNormal, now)
	}
	return d
}

// naiveBuckets makes the driver keep to limits with plain token buckets,
// burst Count refilled at Count per Per: the reading that lets 2×Count
// through one window.
func (d *driver) naiveBuckets(limits []sdk.Limit) *driver {
	bucket := func(l sdk.Limit) *rate.Limiter {
		return rate.NewLimiter(rate.Limit(float64(l.Count)/l.Per.Seconds()), l.Count)
	}
	var channel []*rate.Limiter
	for _, l := range limits {
		if l.Scope == sdk.ScopeChannel {
			channel = append(channel, bucket(l))
		}
	}
	recipients := map[string][]*rate.Limiter{}
	d.admit = func(recipient string, now time.Time) time.Duration {
		rb, ok := recipients[recipient]
		if !ok {
			for _, l := range limits {
				if l.Scope == sdk.ScopeRecipient {
					rb = append(rb, bucket(l))
				}
			}
			recipients[recipient] = rb
		}
		all := append(slices.Clone(channel), rb...)
		var wait time.Duration
		for _, b := range all {
			if short := 1 - b.TokensAt(now); short > 0 {
				wait = max(wait, time.Duration(math.Ceil(short/float64(b.Limit())*float64(time.Second))))
			}
		}
		if wait > 0 {
			return wait
		}
		for _, b := range all {
			b.AllowN(now, 1)
		}
		return 0
	}
	return d
}

// run drives msgs (each due at its given time, or now) to an outcome.
func (d *driver) run(msgs []sdk.Message, due ...time.Time) map[string]outcome {
	d.t.Helper()
	type pending struct {
		m   sdk.Message
		due time.Time
		out outcome
	}
	var queue []*pending
	for i, m := range msgs {
		p := &pending{m: m, due: d.clock.Now()}
		if i < len(due) {
			p.due = due[i]
		}
		queue = append(queue, p)
	}
	done := map[string]outcome{}
	for round := 0; len(queue) > 0; round++ {
		require.Less(d.t, round, 100_000, "driver did not settle")
		now := d.clock.Now()
		var batch []*pending
		var rest []*pending
		for _, p := range queue {
			if len(batch) < d.batchSize && !p.due.After(now) {
				if wait := d.admit(p.m.Recipient, now); wait > 0 {
					p.due = now.Add(wait)
				} else {
					batch = append(batch, p)
					continue
				}
			}
			rest = append(rest, p)
		}
		if len(batch) == 0 {
			next := rest[0].due
			for _, p := range rest {
				if p.due.Before(next) {
					next = p.due
				}
			}
			d.clock.Set(next)
			queue = rest
			continue
		}
		msgs := make([]sdk.Message, len(batch))
		for i, p := range batch {
			msgs[i] = p.m
		}
		res, err := d.ch.Send(context.Background(), msgs)
		require.NoError(d.t, err)
		require.Len(d.t, res, len(batch))
		for i, p := range batch {
			r := res[i]
			require.Equal(d.t, p.m.ID, r.ID)
			switch r.Status {
			case sdk.StatusRateLimited:
				require.GreaterOrEqual(d.t, r.RetryAfter, time.Duration(0))
				p.out.rateLimited++
				p.due = now.Add(r.RetryAfter)
				rest = append(rest, p)
			case sdk.StatusRetryable:
				p.out.attempts++
				if p.out.attempts > len(d.backoff) {
					p.out.result = r
					done[p.m.ID] = p.out
					continue
				}
				p.m.Attempt++
				p.due = now.Add(max(d.backoff[p.out.attempts-1], r.RetryAfter))
				rest = append(rest, p)
			default:
				p.out.attempts++
				p.out.result = r
				done[p.m.ID] = p.out
			}
		}
		queue = rest
	}
	return done
}
