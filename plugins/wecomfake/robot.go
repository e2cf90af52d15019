package wecomfake

import (
	"bytes"
	"encoding/json"
	"net/url"
	"time"
)

// robotReq is the part of a webhook/send body the fake reads.
type robotReq struct {
	MsgType string `json:"msgtype"`
}

// robotLimits are the byte caps of robot content; past them WeCom answers
// 40058 rather than truncating.
var robotLimits = map[string]int{"text": 2048, "markdown": 4096, "markdown_v2": 4096}

var robotMsgTypes = map[string]bool{
	"text": true, "markdown": true, "markdown_v2": true, "image": true,
	"news": true, "file": true, "voice": true, "template_card": true,
}

// webhook answers POST /cgi-bin/webhook/send. Callers hold s.mu.
func (s *Server) webhook(q url.Values, body []byte) reply {
	rb, ok := s.robots[q.Get("key")]
	if !ok {
		return fail(93000)
	}
	if !rb.enabled {
		return fail(93004)
	}
	var fields map[string]json.RawMessage
	var req robotReq
	if json.Unmarshal(body, &fields) != nil || json.Unmarshal(body, &req) != nil {
		return failf(40058, "invalid Request Parameter: body is not a JSON object")
	}
	if !robotMsgTypes[req.MsgType] {
		return fail(40008)
	}
	var obj map[string]any
	if json.Unmarshal(fields[req.MsgType], &obj) != nil || obj == nil {
		return fail(44004)
	}
	str := func(k string) string { v, _ := obj[k].(string); return v }
	content := ""
	switch req.MsgType {
	case "text", "markdown", "markdown_v2":
		content = str("content")
		if content == "" {
			return fail(44004)
		}
		if len(content) > robotLimits[req.MsgType] {
			return failf(40058, "invalid Request Parameter: content exceeds %d bytes", robotLimits[req.MsgType])
		}
	case "image":
		if str("base64") == "" || str("md5") == "" {
			return fail(44004)
		}
	case "file", "voice":
		if str("media_id") == "" {
			return fail(44004)
		}
	case "news":
		if arts, _ := obj["articles"].([]any); len(arts) == 0 {
			return fail(44004)
		}
	case "template_card":
		if str("card_type") == "" {
			return fail(44004)
		}
	}
	now := s.now()
	rb.window = pruneBefore(rb.window, now.Add(-time.Minute))
	if s.cfg.RobotPerMinute > 0 && len(rb.window) >= s.cfg.RobotPerMinute {
		return fail(45009)
	}
	rb.window = append(rb.window, now)
	s.rec.addMsg(Msg{Time: now, CorpID: rb.corp, Robot: rb.key, MsgType: req.MsgType, Content: content, Body: bytes.Clone(body)})
	return reply{}
}
