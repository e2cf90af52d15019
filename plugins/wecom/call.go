package wecom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/heraldhq/herald/plugins/sdk"
)

// WeCom API paths the channel calls.
const (
	pathGetToken = "/cgi-bin/gettoken"
	pathSend     = "/cgi-bin/message/send"
	pathWebhook  = "/cgi-bin/webhook/send"
	pathRecall   = "/cgi-bin/message/recall"
	pathCard     = "/cgi-bin/message/update_template_card"
)

// maxReply bounds a reply body; WeCom's are a few hundred bytes.
const maxReply = 1 << 20

// callError is a call that did not get a business answer, or whose answer
// stops the message, already judged.
type callError struct {
	status     sdk.Status
	code       string // WeCom errcode, verbatim; empty for transport failures
	msg        string // never holds a secret, token or key
	retryAfter time.Duration
}

func (e *callError) Error() string {
	if e.code != "" {
		return "wecom: errcode " + e.code + ": " + e.msg
	}
	return "wecom: " + e.msg
}

func (e *callError) result(id string) sdk.Result {
	return sdk.Result{ID: id, Status: e.status, Code: e.code, Error: e.msg, RetryAfter: e.retryAfter}
}

// errorFromReply turns a non-zero business reply into a callError.
func errorFromReply(r apiReply) *callError {
	res := judge("", "", r)
	return &callError{status: res.Status, code: res.Code, msg: res.Error, retryAfter: res.RetryAfter}
}

// call makes one HTTP call and decodes WeCom's JSON reply. HTTP errors,
// timeouts, resets, non-200 statuses and non-JSON bodies are transport
// failures: retryable, and the same body goes again.
func (st *state) call(ctx context.Context, method, path string, q url.Values, body []byte) (apiReply, *callError) {
	ctx, cancel := context.WithTimeout(ctx, st.s.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, st.s.baseURL+path+"?"+q.Encode(), rd)
	if err != nil {
		return apiReply{}, &callError{status: sdk.StatusConfig, msg: "build request: " + st.redact(err.Error())}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
	}
	resp, err := st.client.Do(req)
	if err != nil {
		return apiReply{}, &callError{status: sdk.StatusRetryable, msg: fmt.Sprintf("%s %s: %s", method, path, st.describe(ctx, err))}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil {
		return apiReply{}, &callError{status: sdk.StatusRetryable, msg: fmt.Sprintf("%s %s: reading reply: %s", method, path, st.describe(ctx, err))}
	}
	if resp.StatusCode != http.StatusOK {
		return apiReply{}, &callError{status: sdk.StatusRetryable, msg: fmt.Sprintf("%s %s: HTTP %s", method, path, resp.Status)}
	}
	var r apiReply
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&r); err != nil {
		return apiReply{}, &callError{status: sdk.StatusRetryable, msg: fmt.Sprintf("%s %s: reply is not WeCom JSON (%d bytes)", method, path, len(raw))}
	}
	return r, nil
}

// describe words a transport error without the request URL, which holds
// the secret, the token or the robot key.
func (st *state) describe(ctx context.Context, err error) string {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return "timeout after " + st.s.timeout.String()
	}
	return st.redact(err.Error())
}

// redact removes every credential the channel knows from a text.
func (st *state) redact(s string) string {
	for _, secret := range []string{st.s.secret, st.s.robotKey, st.tokens.current()} {
		if len(secret) >= 4 {
			s = strings.ReplaceAll(s, secret, "[redacted]")
			s = strings.ReplaceAll(s, url.QueryEscape(secret), "[redacted]")
		}
	}
	return s
}

// fetchToken calls gettoken once.
func (st *state) fetchToken(ctx context.Context) (token string, lifetime time.Duration, e *callError) {
	q := url.Values{"corpid": {st.s.corpID}, "corpsecret": {st.s.secret}}
	r, e := st.call(ctx, http.MethodGet, pathGetToken, q, nil)
	if e != nil {
		return "", 0, e
	}
	if r.ErrCode != 0 {
		e := errorFromReply(r)
		if e.status == sdk.StatusPermanent {
			// Permanent judges a message, which never reached message/send:
			// a code gettoken is not known to give says nothing about it.
			e.status = sdk.StatusRetryable
		}
		return "", 0, e
	}
	if r.AccessToken == "" {
		return "", 0, &callError{status: sdk.StatusRetryable, code: "0", msg: "gettoken answered ok without a token"}
	}
	lifetime = time.Duration(r.ExpiresIn) * time.Second
	if lifetime <= 0 {
		lifetime = 7200 * time.Second
	}
	return r.AccessToken, lifetime, nil
}
