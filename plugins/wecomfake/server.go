package wecomfake

import (
	"bytes"
	"cmp"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// API paths the fake answers; anything else is 404 with an empty body.
const (
	PathGetToken = "/cgi-bin/gettoken"
	PathSend     = "/cgi-bin/message/send"
	PathRecall   = "/cgi-bin/message/recall"
	PathCard     = "/cgi-bin/message/update_template_card"
	PathWebhook  = "/cgi-bin/webhook/send"
)

// maxBody bounds a request body; a robot image may be 2 MB before base64.
const maxBody = 8 << 20

// Server is the fake. Its zero value is not usable; call New.
type Server struct {
	cfg Config

	mu       sync.Mutex
	offset   time.Duration // added to cfg.NowFunc by Advance
	latency  time.Duration
	corps    map[string]*corp
	bySecret map[string]*app
	robots   map[string]*robot
	tokens   map[string]*token
	dups     map[string]dupEntry
	windows  map[string][]time.Time // per app and member: delivery times in the last hour
	sent     map[string]*sentMsg    // by msgid, for recall
	codes    map[string]*cardCode   // response codes for update_template_card (card.go)
	faults   []*faultState
	rng      *rand.Rand
	seq      uint64
	rec      records
	// Callbacks (callbacks.go): where each corp's go, 微信客服 messages by
	// "CORP/OPEN_KFID", and callbacks held for an out-of-order release.
	callbacks map[string]*callbackTarget
	kf        map[string][]kfMsg
	held      []heldCallback
}

type corp struct {
	id          string
	apps        map[int]*app
	members     map[string]*member // by lower-cased userid
	departments map[int]bool
	tags        map[int][]string // lower-cased userids
	// The contacts view (contacts.go): department details, tag names and
	// tagged departments.
	deptInfo map[int]*department
	tagNames map[int]string
	tagDepts map[int][]int
	nameOf   map[string]string // lower-cased userid -> name
}

type app struct {
	corp    *corp
	agentID int
	secret  string
	enabled bool
	trusted map[string]bool
	current *token // the token sticky mode hands out again
}

type member struct {
	userID      string // lower-cased
	departments []int
	visible     bool
	licensed    bool
}

type robot struct {
	key     string
	corp    string
	enabled bool
	window  []time.Time
}

type token struct {
	value   string
	app     *app
	expires time.Time
	revoked bool
}

type dupEntry struct {
	at    time.Time
	msgID string
}

type sentMsg struct {
	app *app
	at  time.Time
}

// New builds a server seeded from cfg (the demo corp when cfg names none).
// It does not validate cfg: ParseConfig and LoadConfig do, with clear
// errors; a Config built in code is taken as it is.
func New(cfg Config) *Server {
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:      cfg,
		corps:    map[string]*corp{},
		bySecret: map[string]*app{},
		robots:   map[string]*robot{},
		tokens:   map[string]*token{},
		dups:     map[string]dupEntry{},
		windows:  map[string][]time.Time{},
		sent:     map[string]*sentMsg{},
		codes:    map[string]*cardCode{},
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		rec:      newRecords(cfg.MaxRecords),
	}
	for _, cc := range cfg.Corps {
		c := &corp{
			id:          cc.ID,
			apps:        map[int]*app{},
			members:     map[string]*member{},
			departments: map[int]bool{},
			tags:        map[int][]string{},
			deptInfo:    map[int]*department{},
			tagNames:    map[int]string{},
			tagDepts:    map[int][]int{},
			nameOf:      map[string]string{},
		}
		s.corps[cc.ID] = c
		for _, ac := range cc.Apps {
			a := &app{corp: c, agentID: ac.AgentID, secret: ac.Secret, enabled: !ac.Disabled}
			if len(ac.TrustedIPs) > 0 {
				a.trusted = map[string]bool{}
				for _, ip := range ac.TrustedIPs {
					a.trusted[ip] = true
				}
			}
			c.apps[a.agentID] = a
			s.bySecret[a.secret] = a
		}
		for _, mc := range cc.Members {
			u := strings.ToLower(mc.UserID)
			c.members[u] = &member{userID: u, departments: slices.Clone(mc.Departments), visible: !mc.Hidden, licensed: !mc.Unlicensed}
			c.nameOf[u] = cmp.Or(mc.Name, mc.UserID)
		}
		for _, d := range cc.Departments {
			c.departments[d.ID] = true
			c.deptInfo[d.ID] = newDepartment(d)
		}
		for _, t := range cc.Tags {
			c.tagNames[t.ID] = t.Name
			c.tagDepts[t.ID] = slices.Clone(t.Departments)
			for _, u := range t.UserIDs {
				c.tags[t.ID] = append(c.tags[t.ID], strings.ToLower(u))
			}
			if c.tags[t.ID] == nil {
				c.tags[t.ID] = []string{}
			}
		}
		for _, rc := range cc.Robots {
			s.robots[rc.Key] = &robot{key: rc.Key, corp: cc.ID, enabled: !rc.Disabled}
		}
	}
	return s
}

// Config returns the effective config, defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// now is the fake's time; callers hold s.mu or accept a racy offset read.
func (s *Server) now() time.Time { return s.cfg.NowFunc().Add(s.offset) }

// Now is the fake's current time.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now()
}

// Advance moves the fake's clock forward by d (on top of NowFunc), which
// expires tokens and empties limit windows without waiting.
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset += d
}

// Handler is the WeCom API.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveAPI) }

// reply is what an endpoint answers: an HTTP status and a JSON body, or
// raw bytes for faults.
type reply struct {
	status  int
	errcode int
	errtext string // short error text; the errmsg is formatted from it
	body    any    // the JSON reply; errcode/errmsg filled by write
	raw     []byte // sent verbatim instead of body when not nil
	reset   bool   // hijack and close the connection instead of answering
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		body = nil
	}
	ip := clientIP(r)
	known := r.URL.Path == PathGetToken || r.URL.Path == PathSend || r.URL.Path == PathRecall || r.URL.Path == PathCard || r.URL.Path == PathWebhook ||
		r.URL.Path == PathKfSyncMsg || contactsPaths[r.URL.Path]

	s.mu.Lock()
	call := s.rec.addCall(Call{
		Time:   s.now(),
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.Query(),
		Body:   bytes.Clone(body),
		IP:     ip,
	})
	latency := s.latency
	s.mu.Unlock()

	if !known {
		s.finishCall(call, http.StatusNotFound, 0)
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}

	s.mu.Lock()
	var rep reply
	f, hit := s.applyFault(r.URL.Path)
	if !hit || f.Kind == FaultReset {
		switch r.URL.Path {
		case PathGetToken:
			rep = s.getToken(r.URL.Query())
		case PathSend:
			rep = s.send(r.URL.Query(), body, ip)
		case PathRecall:
			rep = s.recall(r.URL.Query(), body, ip)
		case PathCard:
			rep = s.updateCard(r.URL.Query(), body, ip)
		case PathWebhook:
			rep = s.webhook(r.URL.Query(), body)
		case PathKfSyncMsg:
			rep = s.kfSyncMsg(r.URL.Query(), body)
		default:
			rep = s.contacts(r.URL.Path, r.URL.Query(), ip)
		}
	}
	if hit {
		if f.Kind == FaultReset {
			rep = reply{reset: true}
		} else {
			rep = faultReply(f)
		}
	}
	s.mu.Unlock()

	if rep.reset {
		s.finishCall(call, 0, -1)
		resetConn(w)
		return
	}
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	s.finishCall(call, status, rep.errcode)
	s.write(w, rep, ip)
}

// resetConn closes the connection without a reply, with a TCP reset where
// the connection allows it: the client cannot tell whether the request was
// acted on.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // net/http closes the connection
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
