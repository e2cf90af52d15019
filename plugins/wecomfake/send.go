package wecomfake

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// flexInt is a number that libraries send as a JSON number or a string.
type flexInt struct {
	set bool // present and not empty
	bad bool // present but not an integer
	v   int
}

func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		return nil
	}
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(b, &s); err != nil {
			f.bad = true
			return nil
		}
		if s = strings.TrimSpace(s); s == "" {
			return nil
		}
	}
	f.set = true
	n, err := strconv.Atoi(s)
	if err != nil {
		f.bad = true
		return nil
	}
	f.v = n
	return nil
}

// sendReq is the part of a message/send body the fake reads.
type sendReq struct {
	ToUser                 string  `json:"touser"`
	ToParty                string  `json:"toparty"`
	ToTag                  string  `json:"totag"`
	MsgType                string  `json:"msgtype"`
	AgentID                flexInt `json:"agentid"`
	Safe                   flexInt `json:"safe"`
	EnableDuplicateCheck   flexInt `json:"enable_duplicate_check"`
	DuplicateCheckInterval flexInt `json:"duplicate_check_interval"`
}

// sendReply is message/send's body besides errcode and errmsg.
type sendReply struct {
	InvalidUser    string `json:"invaliduser"`
	InvalidParty   string `json:"invalidparty"`
	InvalidTag     string `json:"invalidtag"`
	UnlicensedUser string `json:"unlicenseduser"`
	MsgID          string `json:"msgid,omitempty"`
	ResponseCode   string `json:"response_code,omitempty"`
}

// sendFields are the top-level fields message/send defines besides the
// body object named by msgtype.
var sendFields = map[string]bool{
	"touser": true, "toparty": true, "totag": true, "msgtype": true, "agentid": true,
	"safe": true, "enable_id_trans": true, "enable_duplicate_check": true, "duplicate_check_interval": true,
}

var appMsgTypes = map[string]bool{
	"text": true, "image": true, "voice": true, "video": true, "file": true,
	"textcard": true, "news": true, "mpnews": true, "markdown": true,
	"miniprogram_notice": true, "template_card": true,
}

// send answers POST /cgi-bin/message/send, checking in WeCom's order.
// Callers hold s.mu.
func (s *Server) send(q url.Values, body []byte, ip string) reply {
	a, rep, ok := s.checkToken(q)
	if !ok {
		return rep
	}
	if a.trusted != nil && !a.trusted[ip] {
		return fail(60020)
	}
	var fields map[string]json.RawMessage
	var req sendReq
	if json.Unmarshal(body, &fields) != nil || json.Unmarshal(body, &req) != nil {
		return failf(40058, "invalid Request Parameter: body is not a JSON object")
	}
	if s.cfg.RejectEscapes && bytes.Contains(body, []byte(`\u`)) {
		return fail(40033)
	}
	if s.cfg.UnknownFields == UnknownFieldsReject {
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			if !sendFields[k] && k != req.MsgType {
				return failf(40058, "invalid Request Parameter: unknown field %s", k)
			}
		}
	}
	switch {
	case !req.AgentID.set:
		return fail(41011)
	case req.AgentID.bad || a.corp.apps[req.AgentID.v] == nil:
		return fail(40056)
	case req.AgentID.v != a.agentID:
		return fail(301002)
	case !a.enabled:
		return fail(50003)
	}
	if !appMsgTypes[req.MsgType] {
		return fail(40008)
	}
	content, rep, ok := checkContent(req.MsgType, fields[req.MsgType])
	if !ok {
		return rep
	}
	if req.MsgType == "news" && req.Safe.v == 1 {
		return fail(40074)
	}
	users, parties, tags := splitIDs(req.ToUser), splitIDs(req.ToParty), splitIDs(req.ToTag)
	switch {
	case len(users) == 0 && len(parties) == 0 && len(tags) == 0:
		return fail(82001)
	case len(users) > 1000:
		return fail(40032)
	case len(parties) > 100:
		return fail(82002)
	case len(tags) > 100:
		return fail(82003)
	}
	truncated := false
	if req.MsgType == "text" || req.MsgType == "markdown" {
		if len(content) > s.cfg.ContentHardCap {
			return fail(45002)
		}
		if len(content) > s.cfg.ContentLimit {
			content, truncated = cutUTF8(content, s.cfg.ContentLimit), true
		}
	}
	if rep, ok := checkFieldSizes(req.MsgType, fields[req.MsgType]); !ok {
		return rep
	}

	deliver, out := s.resolve(a.corp, users, parties, tags)
	if len(deliver) == 0 && out.UnlicensedUser == "" {
		r := fail(81013)
		r.body = out
		return r
	}

	now := s.now()
	msgType := req.MsgType
	if req.EnableDuplicateCheck.v == 1 {
		interval := req.DuplicateCheckInterval.v
		if interval <= 0 {
			interval = DuplicateIntervalDefault
		}
		interval = min(interval, DuplicateIntervalMax)
		sum := sha256.Sum256(body)
		key := fmt.Sprintf("%s|%d|%x", a.corp.id, a.agentID, sum)
		if d, ok := s.dups[key]; ok && now.Sub(d.at) < time.Duration(interval)*time.Second {
			for _, u := range deliver {
				s.rec.addDrop(Drop{Time: now, CorpID: a.corp.id, AgentID: a.agentID, UserID: u, MsgID: d.msgID, MsgType: msgType, Reason: DropDuplicate, Body: bytes.Clone(body)})
			}
			out.MsgID = d.msgID
			if s.cfg.DuplicateMode == DuplicateFresh {
				out.MsgID = s.newMsgID()
			}
			return reply{body: out}
		}
		out.MsgID = s.newMsgID()
		s.dups[key] = dupEntry{at: now, msgID: out.MsgID}
		s.forgetOldDups(now)
	} else {
		out.MsgID = s.newMsgID()
	}
	taskID := ""
	if msgType == "template_card" {
		out.ResponseCode = "rc_" + out.MsgID
		s.codes[out.ResponseCode] = &cardCode{at: now, app: a}
		if ct, id := cardOf(fields[msgType]); interactive[ct] {
			taskID = id
		}
	}
	s.sent[out.MsgID] = &sentMsg{app: a, at: now}

	for _, u := range deliver {
		key := fmt.Sprintf("%s|%d|%s", a.corp.id, a.agentID, u)
		times := pruneBefore(s.windows[key], now.Add(-time.Hour))
		reason := ""
		switch {
		case s.cfg.MemberPerMinute > 0 && countAfter(times, now.Add(-time.Minute)) >= s.cfg.MemberPerMinute:
			reason = DropMinuteLimit
		case s.cfg.MemberPerHour > 0 && len(times) >= s.cfg.MemberPerHour:
			reason = DropHourLimit
		}
		if reason != "" {
			s.windows[key] = times
			s.rec.addDrop(Drop{Time: now, CorpID: a.corp.id, AgentID: a.agentID, UserID: u, MsgID: out.MsgID, MsgType: msgType, Reason: reason, Body: bytes.Clone(body)})
			continue
		}
		s.windows[key] = append(times, now)
		s.rec.addMsg(Msg{Time: now, CorpID: a.corp.id, AgentID: a.agentID, UserID: u, MsgID: out.MsgID, MsgType: msgType, Content: content, Truncated: truncated, TaskID: taskID, Body: bytes.Clone(body)})
	}
	return reply{body: out}
}

func (s *Server) newMsgID() string {
	s.seq++
	return fmt.Sprintf("fkmsg%012d", s.seq)
}

// forgetOldDups keeps the duplicate index to the longest window and the
// recall index to a day, now and then.
func (s *Server) forgetOldDups(now time.Time) {
	if len(s.dups)%1024 != 0 {
		return
	}
	for k, d := range s.dups {
		if now.Sub(d.at) > DuplicateIntervalMax*time.Second {
			delete(s.dups, k)
		}
	}
	for id, m := range s.sent {
		if now.Sub(m.at) > 24*time.Hour {
			delete(s.sent, id)
		}
	}
}

// resolve turns touser/toparty/totag into the members to deliver to
// (sorted, distinct) and the reply's invalid and unlicensed lists.
func (s *Server) resolve(c *corp, users, parties, tags []string) ([]string, sendReply) {
	var out sendReply
	set := map[string]bool{}
	var invalidUsers, invalidParties, invalidTags, unlicensed []string
	add := func(m *member) {
		if !m.visible {
			return
		}
		set[m.userID] = true
	}
	if slices.Contains(users, "@all") {
		for _, m := range c.members {
			add(m)
		}
		users, parties, tags = nil, nil, nil
	}
	for _, u := range users {
		m, ok := c.members[strings.ToLower(u)]
		if !ok || !m.visible {
			invalidUsers = append(invalidUsers, strings.ToLower(u))
			continue
		}
		add(m)
	}
	for _, p := range parties {
		id, err := strconv.Atoi(p)
		if err != nil || !c.departments[id] {
			invalidParties = append(invalidParties, p)
			continue
		}
		for _, m := range c.members {
			if slices.Contains(m.departments, id) {
				add(m)
			}
		}
	}
	for _, t := range tags {
		id, err := strconv.Atoi(t)
		userids, ok := c.tags[id]
		if err != nil || !ok {
			invalidTags = append(invalidTags, t)
			continue
		}
		for _, u := range userids {
			if m, ok := c.members[u]; ok {
				add(m)
			}
		}
	}
	var deliver []string
	for u := range set {
		if !c.members[u].licensed {
			unlicensed = append(unlicensed, u)
			continue
		}
		deliver = append(deliver, u)
	}
	slices.Sort(deliver)
	slices.Sort(unlicensed)
	out.InvalidUser = strings.Join(invalidUsers, "|")
	out.InvalidParty = strings.Join(invalidParties, "|")
	out.InvalidTag = strings.Join(invalidTags, "|")
	out.UnlicensedUser = strings.Join(unlicensed, "|")
	return deliver, out
}

// checkContent checks the message object of a msgtype for presence and
// emptiness (40008/44004) and returns its text content when it has one.
func checkContent(msgType string, raw json.RawMessage) (string, reply, bool) {
	var obj map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &obj) != nil || obj == nil {
		return "", fail(44004), false
	}
	str := func(k string) string { v, _ := obj[k].(string); return v }
	switch msgType {
	case "text", "markdown":
		c := str("content")
		if c == "" {
			return "", fail(44004), false
		}
		return c, reply{}, true
	case "image", "voice", "video", "file":
		if str("media_id") == "" {
			return "", fail(44004), false
		}
	case "textcard":
		if str("title") == "" || str("description") == "" || str("url") == "" {
			return "", fail(44004), false
		}
		return str("title"), reply{}, true
	case "news", "mpnews":
		arts, _ := obj["articles"].([]any)
		if len(arts) == 0 {
			return "", fail(44004), false
		}
	case "template_card":
		if str("card_type") == "" {
			return "", fail(44004), false
		}
	}
	return "", reply{}, true
}

// checkFieldSizes refuses over-long fields that WeCom does not truncate.
func checkFieldSizes(msgType string, raw json.RawMessage) (reply, bool) {
	var obj map[string]any
	_ = json.Unmarshal(raw, &obj)
	str := func(k string) string { v, _ := obj[k].(string); return v }
	switch msgType {
	case "textcard":
		switch {
		case len(str("title")) > 128:
			return failf(40058, "invalid Request Parameter: textcard.title exceeds 128 bytes"), false
		case len(str("description")) > 512:
			return failf(40058, "invalid Request Parameter: textcard.description exceeds 512 bytes"), false
		case utf8.RuneCountInString(str("btntxt")) > 4:
			return failf(40058, "invalid Request Parameter: textcard.btntxt exceeds 4 characters"), false
		}
	case "news", "mpnews":
		if arts, _ := obj["articles"].([]any); len(arts) > 8 {
			return failf(40058, "invalid Request Parameter: more than 8 articles"), false
		}
	}
	return reply{}, true
}

// splitIDs splits a '|'-joined recipient list, dropping empty entries.
func splitIDs(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, "|") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// cutUTF8 cuts s to at most n bytes on a rune boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// pruneBefore drops the times not after t from a sorted slice.
func pruneBefore(times []time.Time, t time.Time) []time.Time {
	i := 0
	for i < len(times) && !times[i].After(t) {
		i++
	}
	return times[i:]
}

// countAfter counts the times after t in a sorted slice.
func countAfter(times []time.Time, t time.Time) int {
	n := 0
	for i := len(times) - 1; i >= 0 && times[i].After(t); i-- {
		n++
	}
	return n
}

// recallReq is message/recall's body.
type recallReq struct {
	MsgID string `json:"msgid"`
}

// recall answers POST /cgi-bin/message/recall. Callers hold s.mu.
func (s *Server) recall(q url.Values, body []byte, ip string) reply {
	a, rep, ok := s.checkToken(q)
	if !ok {
		return rep
	}
	if a.trusted != nil && !a.trusted[ip] {
		return fail(60020)
	}
	var req recallReq
	if json.Unmarshal(body, &req) != nil {
		return failf(40058, "invalid Request Parameter: body is not a JSON object")
	}
	m, ok := s.sent[req.MsgID]
	if req.MsgID == "" || !ok || m.app != a {
		return failf(40058, "invalid Request Parameter: msgid")
	}
	if s.now().Sub(m.at) > 24*time.Hour {
		return fail(42052)
	}
	s.rec.markRecalled(req.MsgID)
	return reply{}
}
