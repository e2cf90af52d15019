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
	if err := c.post(ctx, pathKfSyncMsg, body, &r); err != nil {
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

// post calls a JSON endpoint with the app's token, refreshing a rejected
// token once, as get does.
func (c *ContactsClient) post(ctx context.Context, path string, body []byte, into any) error {
	for attempt := 0; ; attempt++ {
		tok, err := c.accessToken(ctx)
		if err != nil {
			return err
		}
		raw, err := c.callPost(ctx, path, url.Values{"access_token": {tok}}, body)
		if err != nil {
			return err
		}
		code, msg, err := envelope(path, raw)
		if err != nil {
			return err
		}
		if (code == 40014 || code == 42001) && attempt == 0 {
			c.dropToken(tok)
			continue
		}
		if code != 0 {
			return &APIError{Path: path, Code: code, Msg: msg}
		}
		if err := json.Unmarshal(raw, into); err != nil {
			return fmt.Errorf("wecom %s: reply does not have the expected shape: %v", path, err)
		}
		return nil
	}
}

func (c *ContactsClient) callPost(ctx context.Context, path string, q url.Values, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.BaseURL+path+"?"+q.Encode(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("wecom %s: build request: %w", path, ErrContactsConfig)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.cfg.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("wecom %s: %s", path, c.redact(err.Error()))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxContactsReply))
	if err != nil {
		return nil, fmt.Errorf("wecom %s: reading reply: %s", path, c.redact(err.Error()))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("wecom %s: HTTP %s", path, resp.Status)
	}
	return raw, nil
}
