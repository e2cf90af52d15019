package wecom

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/heraldhq/herald/plugins/sdk"
)

// transientHold is how long a failed token fetch that is not a
// configuration failure is remembered, so that a batch meeting a sick
// gettoken makes one call, not one per message.
const transientHold = 5 * time.Second

// tokenSource holds the access token of one app (corp + agent). It fetches
// lazily, refreshes before expiry, and lets one fetch serve every
// concurrent caller.
type tokenSource struct {
	st *state

	mu        sync.Mutex
	value     string
	refreshAt time.Time
	expiresAt time.Time
	failure   *callError
	failUntil time.Time

	flight singleflight.Group
}

// current returns the cached token, "" when there is none.
func (ts *tokenSource) current() string {
	if ts == nil {
		return ""
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.value
}

// cached answers from memory when it can.
func (ts *tokenSource) cached() (string, *callError, bool) {
	now := ts.st.now()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.value != "" && now.Before(ts.refreshAt) {
		return ts.value, nil, true
	}
	if ts.failure != nil && now.Before(ts.failUntil) {
		if ts.stillValid(now) {
			return ts.value, nil, true
		}
		return "", ts.failure, true
	}
	return "", nil, false
}

// stillValid reports whether the cached token may still be used after an
// early refresh failed for a reason that is not the configuration: it has
// not expired, and WeCom has not rejected it. Call with the lock.
func (ts *tokenSource) stillValid(now time.Time) bool {
	return ts.value != "" && now.Before(ts.expiresAt) && ts.failure.status != sdk.StatusConfig
}

// get returns a token, fetching one if needed. Concurrent callers share
// one fetch; a caller whose ctx ends stops waiting, not the fetch.
func (ts *tokenSource) get(ctx context.Context) (string, *callError) {
	if v, e, ok := ts.cached(); ok {
		return v, e
	}
	ch := ts.flight.DoChan("token", func() (any, error) {
		// A fetch that finished between cached() and DoChan already did
		// the work.
		if v, e, ok := ts.cached(); ok {
			return v, asError(e)
		}
		return ts.fetch()
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			var ce *callError
			errors.As(r.Err, &ce) // the flight's function returns only *callError
			return "", ce
		}
		return r.Val.(string), nil
	case <-ctx.Done():
		return "", &callError{status: sdk.StatusRetryable, msg: "waiting for an access token: " + ctx.Err().Error()}
	}
}

// fetch calls gettoken and caches the outcome. It runs detached from any
// one caller's context, bounded by the call timeout.
func (ts *tokenSource) fetch() (any, error) {
	v, lifetime, e := ts.st.fetchToken(context.Background())
	now := ts.st.now()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if e != nil {
		ts.failure = e
		switch e.status {
		case sdk.StatusConfig:
			// A wrong secret repeated gets the caller's IP blocked for an
			// hour: remember it, and alert instead of retrying.
			ts.failUntil = now.Add(ts.st.s.configHold)
			ts.st.latch(e)
		case sdk.StatusRateLimited:
			ts.failUntil = now.Add(e.retryAfter)
		default:
			ts.failUntil = now.Add(transientHold)
		}
		if ts.stillValid(now) {
			// The refresh was early: the token in hand still works.
			return ts.value, nil
		}
		return nil, e
	}
	if v == ts.value && now.Before(ts.expiresAt) {
		// WeCom gave back the token in hand, as it does while the token is
		// valid, with the time it has left: it will not change before it
		// expires, so refreshing sooner would only fetch it again (and,
		// at expires_in 0, take it for a new token of two hours).
		ts.refreshAt, ts.failure = ts.expiresAt, nil
		return v, nil
	}
	// Refresh a tenth of the lifetime early (at most five minutes), so a
	// token never expires in flight.
	margin := min(lifetime/10, 5*time.Minute)
	ts.value, ts.refreshAt, ts.expiresAt, ts.failure = v, now.Add(lifetime-margin), now.Add(lifetime), nil
	return v, nil
}

// invalidate drops tok if it is still the cached token: WeCom rejected it.
// A token fetched since is kept, so a late rejection of the old one does
// not cause another fetch.
func (ts *tokenSource) invalidate(tok string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.value == tok {
		ts.value = ""
	}
}

// asError keeps a nil *callError a nil error.
func asError(e *callError) error {
	if e == nil {
		return nil
	}
	return e
}
