package wecom

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/plugins/sdk"
)

// Waits the channel asks for in Result.RetryAfter.
const (
	// rateLimitWait answers 45009: WeCom's per-minute blocks last 60 s.
	rateLimitWait = 60 * time.Second
	// congestionWait is the base wait after 45033 (too many concurrent
	// calls); up to as much again is added as jitter.
	congestionWait = 2 * time.Second
)

// class is what an errcode means for the sender (WECOM.md's outcome table).
type class int

const (
	classUnknown     class = iota // permanent, errcode and errmsg kept verbatim
	classOK                       // sent
	classRetry                    // transient: retry with backoff
	classCongested                // 45033: retry soon, no attempt spent, lower concurrency
	classRateLimited              // 45009: wait the window, no attempt spent
	classToken                    // 40014/42001: refresh once (shared), retry once
	classRecipient                // recipient invalid or invisible: permanent
	classConfig                   // configuration: permanent, alert now
	classMalformed                // request malformed: permanent, a bug or bad rule output
)

var classes = map[int]class{
	0:      classOK,
	-1:     classRetry,
	45033:  classCongested,
	45009:  classRateLimited,
	40014:  classToken,
	42001:  classToken,
	81013:  classRecipient,
	40003:  classRecipient,
	60021:  classRecipient,
	40001:  classConfig,
	40013:  classConfig,
	40091:  classConfig,
	41002:  classConfig,
	41004:  classConfig,
	40056:  classConfig,
	41011:  classConfig,
	301002: classConfig,
	50003:  classConfig,
	60020:  classConfig,
	93000:  classConfig,
	93004:  classConfig,
	40008:  classMalformed,
	40032:  classMalformed,
	40058:  classMalformed,
	44004:  classMalformed,
	45002:  classMalformed,
	82001:  classMalformed,
	82002:  classMalformed,
	82003:  classMalformed,
	82004:  classMalformed,
	// 41001 (token missing) is the channel's own bug: treated as unknown.
}

func classify(code int) class {
	if c, ok := classes[code]; ok {
		return c
	}
	return classUnknown
}

// apiReply is the part of a WeCom reply the channel reads.
type apiReply struct {
	ErrCode        int
	ErrMsg         string
	InvalidUser    string
	UnlicensedUser string
	MsgID          string
	AccessToken    string
	ExpiresIn      int
}

// errNoErrcode is a JSON reply without an integer errcode: not WeCom's.
var errNoErrcode = errors.New("reply has no integer errcode")

// UnmarshalJSON reads a reply leniently, as WECOM.md asks: optional fields
// may be absent, empty strings, null or present, and numbers may come as
// strings (or a msgid as a number). A field of an unexpected shape counts
// as absent, so a success stays a success whatever its optional fields
// look like. Only errcode is required, an integer as a number or a string.
func (r *apiReply) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	code, ok := intOf(m["errcode"])
	if !ok {
		return errNoErrcode
	}
	r.ErrCode = code
	r.ErrMsg = textOf(m["errmsg"])
	r.InvalidUser = textOf(m["invaliduser"])
	r.UnlicensedUser = textOf(m["unlicenseduser"])
	r.MsgID = textOf(m["msgid"])
	r.AccessToken = textOf(m["access_token"])
	r.ExpiresIn, _ = intOf(m["expires_in"])
	return nil
}

// textOf reads a JSON string, or a number as it was written; anything else
// (absent, null, an object) is "".
func textOf(raw json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return ""
	}
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	}
	return ""
}

// intOf reads an integer given as a JSON number or a string.
func intOf(raw json.RawMessage) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(textOf(raw)))
	return n, err == nil
}

// judge turns a business reply to a send into the message's Result.
func judge(id, userID string, r apiReply) sdk.Result {
	res := sdk.Result{ID: id}
	if r.ErrCode != 0 {
		res.Code, res.Error = strconv.Itoa(r.ErrCode), r.ErrMsg
	}
	switch classify(r.ErrCode) {
	case classOK:
		// One recipient per call: if WeCom lists it, it was not delivered.
		for _, list := range []struct{ name, ids string }{{"invaliduser", r.InvalidUser}, {"unlicenseduser", r.UnlicensedUser}} {
			if userID != "" && listed(list.ids, userID) {
				res.Status, res.Code = sdk.StatusPermanent, "0"
				res.Error = "recipient rejected: " + list.name + "=" + list.ids
				return res
			}
		}
		res.Status, res.ProviderID = sdk.StatusSent, r.MsgID
	case classRetry:
		res.Status = sdk.StatusRetryable
	case classCongested:
		// Herald's own concurrency, not the message: no attempt spent,
		// and soon (Retryable would wait the engine's backoff instead).
		res.Status = sdk.StatusRateLimited
		res.RetryAfter = congestionWait + rand.N(congestionWait)
	case classRateLimited:
		res.Status, res.RetryAfter = sdk.StatusRateLimited, rateLimitWait
	case classToken:
		// Still rejected after one shared refresh: token churn, try later.
		res.Status = sdk.StatusRetryable
	case classConfig:
		res.Status = sdk.StatusConfig
	default: // recipient, malformed, unknown
		res.Status = sdk.StatusPermanent
	}
	return res
}

// listed reports whether userID is in a '|'-joined list (WeCom lower-cases
// the ids it lists; userids match case-insensitively).
func listed(ids, userID string) bool {
	for id := range strings.SplitSeq(ids, "|") {
		if strings.EqualFold(strings.TrimSpace(id), userID) {
			return true
		}
	}
	return false
}
