// Package wecom is Herald's WeCom (企业微信) channel: app messages through
// message/send (app mode) or group robot messages through webhook/send
// (robot mode). It judges every message on its own by WeCom's outcome
// table, shares one access token per app, builds byte-identical bodies for
// retries so that WeCom's duplicate check stops doubles, and declares the
// per-member limits WeCom enforces silently so that the host can keep to
// them. See DESIGN.md.
package wecom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/semaphore"

	"github.com/heraldhq/herald/plugins/sdk"
)

// Version is the channel's version, as Info reports it.
const Version = "1.0.0"

// Limits declared to the host: WeCom's own numbers. WeCom counts sliding
// windows and drops the excess silently; the host reads a Limit as "no
// window of length Per holds more than Count" and paces to it (see
// plugins/DESIGN.md), so nothing is declared at a discount here.
var (
	appLimits = []sdk.Limit{
		{Scope: sdk.ScopeRecipient, Count: MemberPerMinute, Per: time.Minute},
		{Scope: sdk.ScopeRecipient, Count: MemberPerHour, Per: time.Hour},
	}
	robotLimits = []sdk.Limit{{Scope: sdk.ScopeChannel, Count: RobotPerMinute, Per: time.Minute}}
)

// WeCom's limits (WECOM.md).
const (
	// MemberPerMinute is how many app messages one member receives from
	// one app in any minute; WeCom drops the excess and still answers ok.
	MemberPerMinute = 30
	// MemberPerHour is the same per hour.
	MemberPerHour = 1000
	// RobotPerMinute is how many messages one group robot accepts in any
	// minute; the excess is answered 45009.
	RobotPerMinute = 20
)

// sentCacheSize bounds the keys remembered as sent by this process.
const sentCacheSize = 10_000

// ErrNotConfigured is returned by Send before a successful Configure.
var ErrNotConfigured = errors.New("wecom: not configured")

// Channel is the WeCom channel. Set the exported fields before Configure;
// it is safe for concurrent use after.
type Channel struct {
	// NowFunc is the clock of token expiry and latched failures; default
	// time.Now.
	NowFunc func() time.Time
	// HTTPClient makes the calls; default a client of the channel's own
	// that follows no redirects.
	HTTPClient *http.Client
	// Logger receives the channel's log lines; default sdk.Logger().
	Logger *slog.Logger

	st atomic.Pointer[state]
}

// New returns an unconfigured channel.
func New() *Channel { return &Channel{} }

// state is one configuration's working set; Configure swaps it whole.
type state struct {
	s         settings
	client    *http.Client
	ownClient bool
	now       func() time.Time
	log       *slog.Logger
	tokens    *tokenSource // app mode only

	mu         sync.Mutex
	latchErr   *callError // a configuration failure, latched until latchUntil
	latchUntil time.Time
	sent       *simplelru.LRU[string, sentEntry]

	keyHinted atomic.Bool // the key_field hint was logged
}

type sentEntry struct {
	msgID string
	at    time.Time
}

// Info implements sdk.Channel. Limits depend on the mode, so they are
// final only after Configure; before it they are app mode's.
func (c *Channel) Info(ctx context.Context) (sdk.Info, error) {
	if err := ctx.Err(); err != nil {
		return sdk.Info{}, err
	}
	info := sdk.Info{Name: "wecom", Version: Version}
	st := c.st.Load()
	if st != nil && st.s.mode == modeRobot {
		info.Limits = append(info.Limits, robotLimits...)
		return info, nil
	}
	cps := CallsPerSecondDefault
	if st != nil {
		cps = st.s.callsPerSecond
	}
	info.Limits = append(append(info.Limits, appLimits...), sdk.Limit{Scope: sdk.ScopeChannel, Count: cps, Per: time.Second})
	return info, nil
}

// Configure implements sdk.Channel. It makes no call to WeCom: the token is
// fetched by the first Send. A new configuration forgets the old one's
// token and latched failures.
func (c *Channel) Configure(ctx context.Context, raw json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s, err := parseConfig(raw)
	if err != nil {
		return err
	}
	st := &state{s: s, client: c.HTTPClient, now: c.NowFunc, log: c.Logger}
	if st.now == nil {
		st.now = time.Now
	}
	if st.log == nil {
		st.log = sdk.Logger()
	}
	st.log = st.log.With("channel", s.channel)
	if st.client == nil {
		st.client = &http.Client{
			Transport: &http.Transport{
				Proxy:               http.ProxyFromEnvironment,
				MaxIdleConnsPerHost: 2 * s.concurrency,
				IdleConnTimeout:     90 * time.Second,
				TLSHandshakeTimeout: 10 * time.Second,
				ForceAttemptHTTP2:   true,
			},
			// A redirect would carry the token or key elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		st.ownClient = true
	}
	if s.mode == modeApp {
		st.tokens = &tokenSource{st: st}
	}
	st.sent, _ = simplelru.NewLRU[string, sentEntry](sentCacheSize, nil)
	if old := c.st.Swap(st); old != nil {
		old.close()
	}
	if s.mode == modeApp {
		st.log.Info("wecom channel configured", "mode", "app", "corp_id", s.corpID, "agent_id", s.agentID)
	} else {
		st.log.Info("wecom channel configured", "mode", "robot")
	}
	return nil
}

// Health implements sdk.HealthChecker: unhealthy while a configuration
// failure is latched.
func (c *Channel) Health(ctx context.Context) error {
	st := c.st.Load()
	if st == nil {
		return ErrNotConfigured
	}
	if e := st.latched(); e != nil {
		return e
	}
	return nil
}

// Close releases idle connections. The channel stays usable.
func (c *Channel) Close() error {
	if st := c.st.Load(); st != nil {
		st.close()
	}
	return nil
}

func (st *state) close() {
	if st.ownClient {
		st.client.CloseIdleConnections()
	}
}

// Send implements sdk.Channel: one HTTP call per message (a message has one
// recipient), at most Concurrency at a time. After a 45033 (too many
// concurrent calls) the rest of the batch goes one call at a time.
func (c *Channel) Send(ctx context.Context, batch []sdk.Message) ([]sdk.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := c.st.Load()
	if st == nil {
		return nil, ErrNotConfigured
	}
	results := make([]sdk.Result, len(batch))
	conc := int64(st.s.concurrency)
	sem := semaphore.NewWeighted(conc)
	var congested atomic.Bool
	var wg sync.WaitGroup
	for i := range batch {
		w := int64(1)
		if congested.Load() {
			w = conc
		}
		if err := sem.Acquire(ctx, w); err != nil {
			for j := i; j < len(batch); j++ {
				results[j] = sdk.Result{ID: batch[j].ID, Status: sdk.StatusRetryable, Error: "not sent: " + err.Error()}
			}
			break
		}
		wg.Go(func() {
			defer sem.Release(w)
			results[i] = st.sendOne(ctx, batch[i])
			if results[i].Code == "45033" {
				congested.Store(true)
			}
		})
	}
	wg.Wait()
	return results, nil
}

// sendOne delivers one message and judges it.
func (st *state) sendOne(ctx context.Context, m sdk.Message) sdk.Result {
	if id, ok := st.wasSent(m.IdempotencyKey); ok {
		return sdk.Result{ID: m.ID, Status: sdk.StatusSent, ProviderID: id}
	}
	robot := st.s.mode == modeRobot
	p, err := parsePayload(m.Payload, robot)
	if err == nil && !robot {
		err = checkRecipient(m.Recipient)
	}
	if err == nil && !robot {
		err = stampTaskID(p, m.ID)
	}
	if err != nil {
		return sdk.Result{ID: m.ID, Status: sdk.StatusPermanent, Error: err.Error()}
	}
	if e := st.latched(); e != nil {
		return e.result(m.ID)
	}

	var r apiReply
	var e *callError
	userID := ""
	if robot {
		r, e = st.call(ctx, http.MethodPost, pathWebhook, url.Values{"key": {st.s.robotKey}}, robotBody(p))
	} else {
		userID = m.Recipient
		r, e = st.sendApp(ctx, appBody(st.s, m.Recipient, m.IdempotencyKey, p))
	}
	if e != nil {
		st.noteFailure(m, e)
		return e.result(m.ID)
	}
	res := judge(m.ID, userID, r)
	switch res.Status {
	case sdk.StatusSent:
		st.markSent(m.IdempotencyKey, res.ProviderID)
	case sdk.StatusConfig:
		st.latch(&callError{status: res.Status, code: res.Code, msg: res.Error})
	default:
		st.noteFailure(m, &callError{status: res.Status, code: res.Code, msg: res.Error})
		if !robot && res.Code == "40058" && st.s.keyField != "-" && st.keyHinted.CompareAndSwap(false, true) {
			// The channel refuses every over-long or malformed payload
			// before sending, so a 40058 may well be WeCom refusing the
			// key field, which it is not confirmed to accept.
			st.log.Warn("WeCom answered 40058 (invalid parameter) to a body the channel checked; if it refuses the idempotency key field, set key_field: \"-\" (see the wecom channel's DESIGN.md)",
				"key_field", st.s.keyField)
		}
	}
	return res
}

// sendApp posts to message/send with the app's token; a token WeCom
// rejects is dropped, fetched again (once, shared) and the call retried
// once with the same body.
func (st *state) sendApp(ctx context.Context, body []byte) (apiReply, *callError) {
	return st.postApp(ctx, pathSend, body)
}

// postApp posts body to an app API path with the app's token, with
// sendApp's one refresh on a rejected token.
func (st *state) postApp(ctx context.Context, path string, body []byte) (apiReply, *callError) {
	for try := 0; ; try++ {
		tok, e := st.tokens.get(ctx)
		if e != nil {
			return apiReply{}, e
		}
		r, e := st.call(ctx, http.MethodPost, path, url.Values{"access_token": {tok}}, body)
		if e != nil || classify(r.ErrCode) != classToken || try == 1 {
			return r, e
		}
		st.tokens.invalidate(tok)
	}
}

// latch holds a configuration failure: until it lapses, sends fail at once
// with it and WeCom is not called.
func (st *state) latch(e *callError) {
	st.mu.Lock()
	first := st.latchErr == nil || !st.now().Before(st.latchUntil)
	st.latchErr, st.latchUntil = e, st.now().Add(st.s.configHold)
	st.mu.Unlock()
	if first {
		st.log.Error("wecom channel misconfigured; sends fail until it is fixed and reconfigured",
			"code", e.code, "error", e.msg, "hold", st.s.configHold)
	}
}

func (st *state) latched() *callError {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.latchErr == nil || !st.now().Before(st.latchUntil) {
		return nil
	}
	return &callError{status: sdk.StatusConfig, code: st.latchErr.code, msg: fmt.Sprintf("not sent: channel configuration failed (held for %s): %s", st.s.configHold, st.latchErr.msg)}
}

// wasSent reports a key this process saw sent within the duplicate-check
// interval: a repeat is answered sent without calling WeCom.
func (st *state) wasSent(key string) (string, bool) {
	if key == "" {
		return "", false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.sent.Get(key)
	if !ok || st.now().Sub(e.at) >= time.Duration(st.s.dupInterval)*time.Second {
		return "", false
	}
	return e.msgID, true
}

func (st *state) markSent(key, msgID string) {
	if key == "" {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sent.Add(key, sentEntry{msgID: msgID, at: st.now()})
}

func (st *state) noteFailure(m sdk.Message, e *callError) {
	st.log.Warn("wecom send failed", "id", m.ID, "attempt", m.Attempt, "status", int(e.status), "code", e.code, "error", e.msg)
}

var _ sdk.Channel = (*Channel)(nil)
var _ sdk.HealthChecker = (*Channel)(nil)
