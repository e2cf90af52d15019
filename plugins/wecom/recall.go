package wecom

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/heraldhq/herald/plugins/sdk"
)

// RecallWindow is how long after sending WeCom lets an app message be
// recalled (message/recall; after it, errcode 42052).
const RecallWindow = 24 * time.Hour

// Recall implements sdk.Recaller: app messages are taken back through
// message/recall, one call each; a group robot's messages have no msgid
// and cannot be (WECOM.md), nor can those past RecallWindow, which are
// answered without a call.
func (c *Channel) Recall(ctx context.Context, batch []sdk.RecallMessage) ([]sdk.RecallResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := c.st.Load()
	if st == nil {
		return nil, ErrNotConfigured
	}
	out := make([]sdk.RecallResult, len(batch))
	for i, m := range batch {
		out[i] = st.recallOne(ctx, m)
	}
	return out, nil
}

func (st *state) recallOne(ctx context.Context, m sdk.RecallMessage) sdk.RecallResult {
	res := sdk.RecallResult{ID: m.ID, Status: sdk.RecallNotRecallable}
	switch {
	case st.s.mode == modeRobot:
		res.Error = "a group robot's (webhook) messages cannot be recalled"
		return res
	case m.ProviderID == "":
		res.Error = "WeCom gave no msgid for it"
		return res
	case !m.SentAt.IsZero() && st.now().Sub(m.SentAt) >= RecallWindow:
		res.Code, res.Error = "42052", "sent more than 24 h ago: WeCom recalls app messages within 24 h"
		return res
	}
	body, _ := json.Marshal(map[string]string{"msgid": m.ProviderID}) // a map of strings always encodes
	r, e := st.postApp(ctx, pathRecall, body)
	if e != nil {
		res.Code, res.Error = e.code, e.msg
		if e.status == sdk.StatusRetryable || e.status == sdk.StatusRateLimited {
			res.Status = sdk.RecallRetryable
		}
		return res
	}
	switch r.ErrCode {
	case 0:
		res.Status = sdk.RecallDone
		return res
	case -1, 45009, 45033:
		res.Status = sdk.RecallRetryable
	}
	res.Code, res.Error = strconv.Itoa(r.ErrCode), st.redact(r.ErrMsg)
	st.log.Warn("wecom recall refused", "id", m.ID, "msgid", m.ProviderID, "code", r.ErrCode, "error", res.Error)
	return res
}

var _ sdk.Recaller = (*Channel)(nil)
