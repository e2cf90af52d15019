package wecomfake

import (
	"net/url"
	"slices"
	"strings"
	"time"
)

// Drop reasons: why a member did not get a message the API accepted.
const (
	// DropMinuteLimit: the member already got MemberPerMinute messages from
	// the app in the last minute. WeCom drops silently and still says ok.
	DropMinuteLimit = "minute limit"
	// DropHourLimit: the same for the hour.
	DropHourLimit = "hour limit"
	// DropDuplicate: the duplicate check found the same body within its
	// interval.
	DropDuplicate = "duplicate"
)

// Call is one request the fake received.
type Call struct {
	Time    time.Time  `json:"time"`
	Method  string     `json:"method"`
	Path    string     `json:"path"`
	Query   url.Values `json:"query"`
	Body    []byte     `json:"body"`
	IP      string     `json:"ip"`
	Status  int        `json:"status"`  // HTTP status; 0 when the connection was reset
	Errcode int        `json:"errcode"` // -1 with Status 0: no reply
}

// Msg is one message one member (or one robot's group) received.
type Msg struct {
	Time      time.Time `json:"time"`
	CorpID    string    `json:"corp_id"`
	AgentID   int       `json:"agent_id,omitempty"`
	UserID    string    `json:"userid,omitempty"` // lower-cased; empty for robot messages
	Robot     string    `json:"robot,omitempty"`  // robot key; empty for app messages
	MsgID     string    `json:"msgid,omitempty"`
	MsgType   string    `json:"msgtype"`
	Content   string    `json:"content,omitempty"` // text or markdown content as shown, after truncation
	Truncated bool      `json:"truncated,omitempty"`
	Recalled  bool      `json:"recalled,omitempty"`
	Body      []byte    `json:"body"` // the request body as sent
	// TaskID is an interactive card's task_id; Updated its replacement
	// (the template_card object update_template_card sent), UpdatedAt when.
	TaskID    string    `json:"task_id,omitempty"`
	Updated   []byte    `json:"updated,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// Drop is a message the API accepted that a member did not get.
type Drop struct {
	Time    time.Time `json:"time"`
	CorpID  string    `json:"corp_id"`
	AgentID int       `json:"agent_id"`
	UserID  string    `json:"userid"`
	MsgID   string    `json:"msgid"`
	MsgType string    `json:"msgtype"`
	Reason  string    `json:"reason"`
	Body    []byte    `json:"body"`
}

// records holds what happened; the Server's mutex guards it.
type records struct {
	max    int
	calls  []*Call
	counts map[string]int
	msgs   []Msg
	drops  []Drop
}

func newRecords(max int) records {
	return records{max: max, counts: map[string]int{}}
}

// trim forgets the oldest half of a record list that reached max.
func trim[T any](s []T, max int) []T {
	if len(s) < max {
		return s
	}
	return append(s[:0:0], s[len(s)/2:]...)
}

func (r *records) addCall(c Call) *Call {
	r.calls = trim(r.calls, r.max)
	r.counts[c.Path]++
	p := &c
	r.calls = append(r.calls, p)
	return p
}

func (r *records) addMsg(m Msg) {
	r.msgs = append(trim(r.msgs, r.max), m)
}

func (r *records) addDrop(d Drop) {
	r.drops = append(trim(r.drops, r.max), d)
}

func (r *records) markRecalled(msgID string) {
	for i := range r.msgs {
		if r.msgs[i].MsgID == msgID {
			r.msgs[i].Recalled = true
		}
	}
}

func (s *Server) finishCall(c *Call, status, errcode int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Status, c.Errcode = status, errcode
}

// Requests returns every recorded request, oldest first.
func (s *Server) Requests() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Call, len(s.rec.calls))
	for i, c := range s.rec.calls {
		out[i] = *c
	}
	return out
}

// Calls counts the requests to path ("/cgi-bin/gettoken", or the short
// "gettoken"), including the forgotten ones.
func (s *Server) Calls(path string) int {
	path = normPath(path)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec.counts[path]
}

// Received returns the app messages a member received, oldest first, across
// corps and apps; the userid matches case-insensitively.
func (s *Server) Received(userID string) []Msg {
	u := strings.ToLower(userID)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Msg
	for _, m := range s.rec.msgs {
		if m.Robot == "" && m.UserID == u {
			out = append(out, m)
		}
	}
	return out
}

// RobotReceived returns the messages a robot posted to its group.
func (s *Server) RobotReceived(key string) []Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Msg
	for _, m := range s.rec.msgs {
		if m.Robot == key {
			out = append(out, m)
		}
	}
	return out
}

// Messages returns every delivered message, app and robot, oldest first.
func (s *Server) Messages() []Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Msg(nil), s.rec.msgs...)
}

// Drops returns every silent drop, oldest first.
func (s *Server) Drops() []Drop {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Drop(nil), s.rec.drops...)
}

// ResetRecords forgets requests, messages and drops (not tokens, limit
// windows or the duplicate index).
func (s *Server) ResetRecords() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec = newRecords(s.rec.max)
}

// normPath accepts "gettoken", "message/send" or the full "/cgi-bin/…".
func normPath(p string) string {
	if p == "" || strings.HasPrefix(p, "/") {
		return p
	}
	return "/cgi-bin/" + p
}

// Recalled lists the msgids taken back through message/recall, in the
// order their messages were received.
func (s *Server) Recalled() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.rec.msgs {
		if m.Recalled && !slices.Contains(out, m.MsgID) {
			out = append(out, m.MsgID)
		}
	}
	return out
}
