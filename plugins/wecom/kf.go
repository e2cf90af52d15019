package wecom

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// pathKfSyncMsg is 微信客服's message pull (doc 94670): the callback
// kf_msg_or_event only says that messages wait.
const pathKfSyncMsg = "/cgi-bin/kf/sync_msg"

// KfLimitDefault is the page size asked of kf/sync_msg (WeCom's maximum).
const KfLimitDefault = 1000

// KfPage is one kf/sync_msg answer: the messages as WeCom wrote them
// (msgid, open_kfid, external_userid, send_time, origin, servicer_userid,
// msgtype, text, …), the cursor to continue from, and whether more wait.
type KfPage struct {
	NextCursor string
	HasMore    bool
	Messages   []KfMessage
}

// KfMessage is one message: its msgid and the whole object.
type KfMessage struct {
	MsgID string
	Raw   json.RawMessage
}

// SyncKfMsg calls kf/sync_msg for the 微信客服 account openKfID from
// cursor ("" the first time), with the callback's token (valid 10
// minutes; without it WeCom allows fewer calls). The client's credentials
// must be those of an app that may use 微信客服 (or the 微信客服 secret).
func (c *ContactsClient) SyncKfMsg(ctx context.Context, openKfID, token, cursor string) (KfPage, error) {
	body, _ := json.Marshal(map[string]any{"cursor": cursor, "token": token, "limit": KfLimitDefault, "open_kfid": openKfID})
	var r struct {
		NextCursor string            `json:"next_cursor"`
		HasMore    flexNum           `json:"has_more"`
		MsgList    []json.RawMessage `json:"msg_list"`
	}
	if err := c.send(ctx, http.MethodPost, pathKfSyncMsg, nil, body, &r); err != nil {
		return KfPage{}, err
	}
	p := KfPage{NextCursor: r.NextCursor, HasMore: r.HasMore == 1}
	for _, m := range r.MsgList {
		var id struct {
			MsgID string `json:"msgid"`
		}
		if err := json.Unmarshal(m, &id); err != nil || id.MsgID == "" {
			return KfPage{}, fmt.Errorf("wecom %s: a message without msgid", pathKfSyncMsg)
		}
		p.Messages = append(p.Messages, KfMessage{MsgID: id.MsgID, Raw: m})
	}
	return p, nil
}
