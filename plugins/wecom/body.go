package wecom

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrBadPayload marks a message the channel refuses before sending: a rule
// produced something WeCom would reject or silently mangle. The result is
// StatusPermanent.
var ErrBadPayload = errors.New("wecom: bad payload")

// Content caps in bytes. WeCom truncates app text past 2048 bytes without
// saying so; Herald refuses instead (see DESIGN.md).
const (
	appContentMax      = 2048
	robotTextMax       = 2048
	robotMarkdownMax   = 4096
	textcardTitleMax   = 128
	textcardDescMax    = 512
	textcardBtnTextMax = 4 // characters
	newsTitleMax       = 128
	newsDescMax        = 512
)

// reservedFields are the body fields the channel sets itself.
var reservedFields = map[string]bool{
	"touser": true, "toparty": true, "totag": true, "agentid": true,
	"enable_duplicate_check": true, "duplicate_check_interval": true,
	"msgtype": true, "safe": true, "enable_id_trans": true, "content": true,
	"text": true, "markdown": true, "markdown_v2": true, "image": true, "voice": true,
	"video": true, "file": true, "textcard": true, "news": true, "mpnews": true,
	"miniprogram_notice": true, "template_card": true,
}

// passFields are the optional top-level app fields a payload may set.
var passFields = []string{"safe", "enable_id_trans"}

// payload is a rule's message body, parsed.
type payload struct {
	msgType string
	object  any            // the body object keyed by msgType
	extra   map[string]any // passFields present in the payload
}

// parsePayload reads WeCom's own body (without recipients and agentid) or
// the shorthand {msgtype: text|markdown, content}.
func parsePayload(raw json.RawMessage, robot bool) (payload, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers keep their exact text in the canonical body
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return payload{}, fmt.Errorf("%w: payload is not a JSON object", ErrBadPayload)
	}
	if _, err := dec.Token(); err != io.EOF {
		return payload{}, fmt.Errorf("%w: trailing data after the payload object", ErrBadPayload)
	}
	p := payload{extra: map[string]any{}}
	p.msgType, _ = m["msgtype"].(string)
	if !validName(p.msgType) {
		return payload{}, fmt.Errorf("%w: msgtype must be a name like \"text\" or \"markdown\"", ErrBadPayload)
	}
	if content, ok := m["content"]; ok {
		if p.msgType != "text" && p.msgType != "markdown" && !(robot && p.msgType == "markdown_v2") {
			return payload{}, fmt.Errorf("%w: the shorthand content field is for msgtype text or markdown, not %q", ErrBadPayload, p.msgType)
		}
		if _, both := m[p.msgType]; both {
			return payload{}, fmt.Errorf("%w: payload has both content and a %s object", ErrBadPayload, p.msgType)
		}
		m[p.msgType] = map[string]any{"content": content}
		delete(m, "content")
	}
	obj, ok := m[p.msgType].(map[string]any)
	if !ok {
		return payload{}, fmt.Errorf("%w: msgtype %q needs a %q object", ErrBadPayload, p.msgType, p.msgType)
	}
	p.object = obj
	for k, v := range m {
		switch {
		case k == "msgtype" || k == p.msgType:
		case !robot && (k == "safe" || k == "enable_id_trans"):
			p.extra[k] = v
		case k == "touser" || k == "toparty" || k == "totag" || k == "agentid" ||
			k == "enable_duplicate_check" || k == "duplicate_check_interval":
			return payload{}, fmt.Errorf("%w: payload must not set %q: the channel sets it", ErrBadPayload, k)
		default:
			return payload{}, fmt.Errorf("%w: unexpected payload field %q", ErrBadPayload, k)
		}
	}
	if err := checkSizes(p.msgType, obj, robot); err != nil {
		return payload{}, err
	}
	return p, nil
}

// checkSizes refuses content WeCom would truncate or reject for length.
func checkSizes(msgType string, obj map[string]any, robot bool) error {
	str := func(k string) (string, bool) { v, ok := obj[k].(string); return v, ok }
	switch msgType {
	case "text", "markdown", "markdown_v2":
		c, ok := str("content")
		if !ok || c == "" {
			return fmt.Errorf("%w: %s.content must be a non-empty string", ErrBadPayload, msgType)
		}
		limit := appContentMax
		if robot {
			limit = robotTextMax
			if msgType != "text" {
				limit = robotMarkdownMax
			}
		}
		if len(c) > limit {
			return fmt.Errorf("%w: %s.content is %d bytes; WeCom allows %d (Herald refuses rather than let WeCom truncate it)", ErrBadPayload, msgType, len(c), limit)
		}
		if !utf8.ValidString(c) {
			return fmt.Errorf("%w: %s.content is not valid UTF-8", ErrBadPayload, msgType)
		}
	case "textcard":
		title, _ := str("title")
		desc, _ := str("description")
		btn, _ := str("btntxt")
		switch {
		case len(title) > textcardTitleMax:
			return fmt.Errorf("%w: textcard.title is %d bytes; WeCom allows %d", ErrBadPayload, len(title), textcardTitleMax)
		case len(desc) > textcardDescMax:
			return fmt.Errorf("%w: textcard.description is %d bytes; WeCom allows %d", ErrBadPayload, len(desc), textcardDescMax)
		case utf8.RuneCountInString(btn) > textcardBtnTextMax:
			return fmt.Errorf("%w: textcard.btntxt is %d characters; WeCom allows %d", ErrBadPayload, utf8.RuneCountInString(btn), textcardBtnTextMax)
		}
	case "news":
		arts, _ := obj["articles"].([]any)
		if len(arts) < 1 || len(arts) > 8 {
			return fmt.Errorf("%w: news needs 1 to 8 articles", ErrBadPayload)
		}
		for i, a := range arts {
			if err := checkArticle(i, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkArticle refuses a news article whose title or description WeCom
// would cut (app and robot news alike).
func checkArticle(i int, a any) error {
	art, ok := a.(map[string]any)
	if !ok {
		return fmt.Errorf("%w: news.articles[%d] must be an object", ErrBadPayload, i)
	}
	for _, f := range []struct {
		key string
		max int
	}{{"title", newsTitleMax}, {"description", newsDescMax}} {
		v, present := art[f.key]
		if !present {
			continue
		}
		s, ok := v.(string)
		switch {
		case !ok:
			return fmt.Errorf("%w: news.articles[%d].%s must be a string", ErrBadPayload, i, f.key)
		case len(s) > f.max:
			return fmt.Errorf("%w: news.articles[%d].%s is %d bytes; WeCom allows %d (Herald refuses rather than let WeCom cut it)", ErrBadPayload, i, f.key, len(s), f.max)
		}
	}
	return nil
}

// checkRecipient refuses a recipient that would address more than one
// member (a message has exactly one recipient).
func checkRecipient(userID string) error {
	switch {
	case userID == "":
		return fmt.Errorf("%w: empty recipient", ErrBadPayload)
	case strings.ContainsAny(userID, "|@") || strings.TrimSpace(userID) != userID:
		return fmt.Errorf("%w: recipient %q is not a single userid", ErrBadPayload, userID)
	case len(userID) > 64:
		return fmt.Errorf("%w: recipient is longer than WeCom's 64-byte userid", ErrBadPayload)
	}
	return nil
}

// appBody builds message/send's body. The same message gives the same
// bytes on every attempt, in every process: fields in a fixed order, the
// body object with sorted keys, no HTML escaping. WeCom's duplicate check
// compares bodies, so a retry must not differ by a byte.
func appBody(s settings, userID, key string, p payload) []byte {
	var b bytes.Buffer
	b.WriteString(`{"touser":`)
	encode(&b, userID)
	b.WriteString(`,"msgtype":`)
	encode(&b, p.msgType)
	b.WriteString(`,"agentid":`)
	b.WriteString(strconv.Itoa(s.agentID))
	b.WriteString(`,`)
	encode(&b, p.msgType)
	b.WriteByte(':')
	encode(&b, p.object)
	for _, k := range passFields {
		if v, ok := p.extra[k]; ok {
			fmt.Fprintf(&b, `,%q:`, k)
			encode(&b, v)
		}
	}
	if s.keyField != "-" {
		fmt.Fprintf(&b, `,%q:`, s.keyField)
		encode(&b, key)
	}
	b.WriteString(`,"enable_duplicate_check":1,"duplicate_check_interval":`)
	b.WriteString(strconv.Itoa(s.dupInterval))
	b.WriteByte('}')
	return b.Bytes()
}

// robotBody builds webhook/send's body, as deterministically.
func robotBody(p payload) []byte {
	var b bytes.Buffer
	b.WriteString(`{"msgtype":`)
	encode(&b, p.msgType)
	b.WriteByte(',')
	encode(&b, p.msgType)
	b.WriteByte(':')
	encode(&b, p.object)
	b.WriteByte('}')
	return b.Bytes()
}

// encode writes v as JSON without HTML escaping (WeCom may refuse \uXXXX
// escapes) and without the encoder's newline. Maps encode with sorted keys.
func encode(b *bytes.Buffer, v any) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // only strings, json.Number, bool, nil, maps and slices of them
	b.Truncate(b.Len() - 1)
}

// validName reports whether s is a lower-case identifier.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}
