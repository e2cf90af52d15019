package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api/buffered"
)

// The audit trail (README "Securing Herald"). Every write the API accepts
// (2xx) is recorded in the replicated state by the node that performed it:
// who (the token's name, never the token), from where, when, what, on
// what, and the status.
//
// Decisions:
//
//   - A record is a command of its own (engine.RecordAudit), proposed
//     here after the handler answered, not a field of the write's own
//     command. Writes have many shapes: one command (a task), several (a
//     retry of 2,000 deliveries is four), none the FSM sees (a join or
//     remove is a Raft configuration change; a directory refresh only
//     wakes the leader), and a record must say how the write was answered,
//     which is known only after it. Putting the actor into every body
//     would also change the meaning of bodies already in logs. The price:
//     a leader that dies between the write's commit and the record's
//     loses that one record. A failed proposal never fails the write (it
//     is done); it is logged at error and counted in
//     herald_audit_failures_total.
//   - Refused requests (4xx, 5xx) are not recorded. Anyone can send a
//     refused request, and what strangers send must not go into the
//     replicated state: a flood of 401s would fill the log and push real
//     records out. Refusals are in each node's log and metrics
//     (herald_api_refused_total).
//   - Reading the trail needs admin: it tells who holds which token and
//     from which addresses they work, which a read token (a wall screen, a
//     monitoring system) has no need to know.
//   - A write forwarded by a follower is recorded by the leader, with the
//     caller the follower established and the client's address, when the
//     follower vouches for them with the cluster secret (Forwarding);
//     without a secret, the leader records what it can check itself: the
//     token's name and the follower's address.

// Forwarding is the cluster's part in writes that reach the leader through
// another node (cluster.Node implements it).
type Forwarding interface {
	// Vouch records on r who this node established the caller to be, for
	// a forward of r to the leader to carry (signed with the cluster
	// secret). A client's own value is replaced.
	Vouch(r *http.Request, caller string)
	// Vouched returns the caller a member vouched for on a forwarded
	// request, and that member's id. ok is false when r was not
	// forwarded, or its forward proves nothing (no cluster secret): via
	// then names the node the request claims forwarded it, if any.
	Vouched(r *http.Request) (caller, via string, ok bool)
	// Forwarded reports a response that another node (the leader)
	// produced: that node performed the write, and records it.
	Forwarded(h http.Header) bool
}

// encodeCaller and decodeCaller carry an Identity between nodes.
func encodeCaller(id Identity) string {
	return url.Values{"actor": {id.Actor}, "role": {id.Role.String()}, "remote": {id.Remote}}.Encode()
}

func decodeCaller(s string) (Identity, bool) {
	v, err := url.ParseQuery(s)
	if err != nil || v.Get("actor") == "" {
		return Identity{}, false
	}
	role, err := ParseRole(v.Get("role"))
	if err != nil {
		return Identity{}, false
	}
	return Identity{Actor: v.Get("actor"), Role: role, Remote: v.Get("remote")}, true
}

// auditNote is where a write's route says what the write is; the audit
// middleware reads it once the handler answered.
type auditNote struct {
	action, target string
	// unchanged: the write changed nothing (setUnchanged).
	unchanged bool
}

type auditNoteKey struct{}

// audited wraps a write's handler: it names the action, and the target
// from the path value named pathTarget ("" for none; the handler may set
// one with setTarget).
func audited(action, pathTarget string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if n, ok := r.Context().Value(auditNoteKey{}).(*auditNote); ok {
			n.action = action
			if pathTarget != "" {
				n.target = r.PathValue(pathTarget)
			}
		}
		h(w, r)
	}
}

// setTarget names what a write acted on, when the path does not say it
// (a task's key from its body, an alert's full id from a prefix).
func setTarget(r *http.Request, target string) {
	if n, ok := r.Context().Value(auditNoteKey{}).(*auditNote); ok {
		n.target = target
	}
}

// setUnchanged says that a write changed nothing (an acked alert acked
// again, a task submitted again as it is): its record is folded into the
// earlier one of the same actor, action and target (engine
// audit_fold.go), so that repeating it cannot flush the trail.
func setUnchanged(r *http.Request) {
	if n, ok := r.Context().Value(auditNoteKey{}).(*auditNote); ok {
		n.unchanged = true
	}
}

// clusterActions names the writes of /v1/cluster/ (served by the cluster
// package), whose member id is in the body. A leave is performed by the
// leader as the remove of the leaving node, and recorded there as
// cluster.remove; cluster.leave is recorded only if a node ever answered a
// leave it performed itself.
var clusterActions = map[string]string{
	"/v1/cluster/join":    "cluster.join",
	"/v1/cluster/remove":  "cluster.remove",
	"/v1/cluster/readmit": "cluster.readmit",
	"/v1/cluster/promote": "cluster.promote",
	"/v1/cluster/leave":   "cluster.leave",
	// Recorded by the new leader, with the member that leads now.
	"/v1/cluster/transfer-leader": "cluster.transfer-leader",
}

// auditor records accepted writes.
type auditor struct {
	s        *server
	records  *groupCommit[engine.RecordAudit]
	failures prometheus.Counter
	refused  *prometheus.CounterVec
}

func newAuditor(s *server, reg *prometheus.Registry) *auditor {
	a := &auditor{
		s:       s,
		records: newAuditGroup(s),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herald_audit_failures_total",
			Help: "Writes accepted whose audit record could not be replicated (each is logged).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_api_refused_total",
			Help: "Writes refused, by status (not recorded in the audit trail).",
		}, []string{"code"}),
	}
	reg.MustRegister(a.failures, a.refused)
	return a
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 && code >= http.StatusOK { // a 1xx is not the answer (buffered.Writer)
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (the forwarding proxy's flushes)
// reach the real writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// middleware records every write next accepts. It sits inside the auth
// middleware (it needs the identity) and outside forwarding (it sees the
// leader's answer to a forwarded write, and leaves it to the leader).
func (a *auditor) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isRead(r) || IsWecomCallback(r) {
			// A callback is WeCom's, not a person's: the event it records
			// is its trace, and thousands of customer messages a day must
			// not push people's records past AuditCap.
			next.ServeHTTP(w, r)
			return
		}
		note := &auditNote{}
		if action, ok := clusterActions[r.URL.Path]; ok && r.Method == http.MethodPost {
			note.action, note.target = action, clusterTarget(r, a.s.cfg.NodeID)
		}
		sw := &buffered.Writer{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), auditNoteKey{}, note)))
		// The answer goes out whole, with its length, before the record is
		// proposed: a client reading to the end has all of it now, not
		// after one more commit (a flushed answer without a length would be
		// chunked, and end only when this handler returns).
		sw.Send()
		if sw.Status() < 200 || sw.Status() > 299 {
			return
		}
		if f := a.s.cfg.Forwarding; f != nil && f.Forwarded(w.Header()) {
			return // the leader performed it and recorded it
		}
		id, _ := IdentityFrom(r.Context())
		if note.action == "" {
			// A write route that names no action (TestEveryWriteIsAudited
			// catches it): still recorded, by its method and path.
			note.action, note.target = r.Method+" "+r.URL.Path, ""
		}
		rec := engine.RecordAudit{
			At: a.s.now(), Actor: id.Actor, Role: id.Role.String(), Remote: id.Remote, Via: id.Via,
			Action: note.action, Target: clip(note.target, maxAuditTarget), Status: sw.Status(), Node: a.s.cfg.NodeID,
			// While a member applies FSM version 3 (no folding), the record
			// is stored whole, as before.
			Unchanged: note.unchanged && a.s.cfg.FSM != nil && a.s.cfg.FSM.OldestMemberFSM() >= engine.FSMAuditFolds,
		}
		// The write is done whatever happens here, and the request's own
		// context may end with the client.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
		defer cancel()
		if _, err := a.records.do(ctx, rec); err != nil {
			a.failures.Inc()
			a.s.cfg.Logger.Error("audit record not replicated; the write itself succeeded",
				"actor", rec.Actor, "remote", rec.Remote, "action", rec.Action, "target", rec.Target, "status", rec.Status, "err", err)
		}
	})
}

// countRefused counts the writes answered with anything but 2xx, whoever
// refused them (the cross-site check, auth, a handler, the leader): they
// are not in the trail, so this is where a flood of them shows.
func (a *auditor) countRefused(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isRead(r) {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status < 200 || sw.status > 299 {
			a.refused.WithLabelValues(strconv.Itoa(sw.status)).Inc()
		}
	})
}

// maxAuditTarget bounds a record's target (task keys and rule names are
// shorter; a path is not): with engine.AuditCap records, the trail stays
// within about 60 MB whatever the writes were.
const maxAuditTarget = 256

// clip cuts s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRead(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions
}

// clusterTarget is the member a cluster write names: the body's id (join,
// remove), or this node (leave). The body is read (bounded) and put back.
func clusterTarget(r *http.Request, self string) string {
	if r.URL.Path == "/v1/cluster/leave" {
		return self
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return ""
	}
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), r.Body))
	var body struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(b, &body) // a bad body is refused by the handler
	return body.ID
}

// AuditView is one record in GET /v1/audit.
type AuditView struct {
	Seq uint64 `json:"seq"`
	// At is in the node's display zone, with its offset.
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Role   string    `json:"role"`
	Remote string    `json:"remote"`
	Via    string    `json:"via,omitempty"`
	Action string    `json:"action"`
	Target string    `json:"target,omitempty"`
	Status int       `json:"status"`
	Node   string    `json:"node"`
	// Unchanged: the write changed nothing. Repeats counts the same
	// writes folded into this record since (Others: of those, how many
	// named another target), LastAt is the newest's time.
	Unchanged bool      `json:"unchanged,omitempty"`
	Repeats   uint64    `json:"repeats,omitempty"`
	Others    uint64    `json:"others,omitempty"`
	LastAt    time.Time `json:"last_at,omitzero"`
}

// AuditResponse is the body of GET /v1/audit.
type AuditResponse struct {
	Records []AuditView `json:"records"`
	// NextCursor is the cursor of the next (older) page; "" when this is
	// the last.
	NextCursor string `json:"next_cursor"`
	// Timezone is the zone of every `at` (the node's display zone).
	Timezone string `json:"timezone"`
	// Capped counts the oldest records dropped because the trail had
	// engine.AuditCap records (a flood of writes), not by age.
	Capped uint64 `json:"capped,omitempty"`
}

// maxAuditLimit bounds one page.
const maxAuditLimit = 1000

// audit is GET /v1/audit?limit=&cursor=&actor=&action=&since=.
func (s *server) audit(w http.ResponseWriter, r *http.Request) {
	if !onlyParams(w, r, "limit", "cursor", "actor", "action", "since") {
		return
	}
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), 100, maxAuditLimit)
	if err != nil {
		writeFieldError(w, &FieldError{"limit", err.Error()})
		return
	}
	aq := engine.AuditQuery{Limit: limit, Actor: q.Get("actor"), Action: q.Get("action")}
	if c := q.Get("cursor"); c != "" {
		if aq.Before, err = strconv.ParseUint(c, 10, 64); err != nil || aq.Before == 0 {
			writeFieldError(w, &FieldError{"cursor", "is not a cursor from next_cursor"})
			return
		}
	}
	if v := q.Get("since"); v != "" {
		if aq.Since, err = s.queryTime(v); err != nil {
			writeFieldError(w, s.badTime("since", err))
			return
		}
	}
	page := s.cfg.FSM.Audit(aq)
	zone := s.zone()
	out := AuditResponse{Records: make([]AuditView, 0, len(page.Records)), Timezone: zone.String(), Capped: page.Capped}
	for _, rec := range page.Records {
		v := AuditView{
			Seq: rec.Seq, At: rec.At.In(zone), Actor: rec.Actor, Role: rec.Role, Remote: rec.Remote, Via: rec.Via,
			Action: rec.Action, Target: rec.Target, Status: rec.Status, Node: rec.Node, Unchanged: rec.Unchanged,
		}
		if fo, ok := page.Folds[rec.Seq]; ok {
			v.Repeats, v.Others, v.LastAt = fo.Repeats, fo.Others, fo.Last.In(zone)
		}
		out.Records = append(out.Records, v)
	}
	if page.Next != 0 {
		out.NextCursor = strconv.FormatUint(page.Next, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

// notVouched explains, in a 401, a write forwarded by a member that could
// not vouch for its caller.
func notVouched(via string) string {
	if via == "" {
		return ""
	}
	return fmt.Sprintf(" or forwarded by a member that proves cluster_secret (this write was forwarded by %s, "+
		"but without a cluster_secret nobody can tell a member's forward from anyone's: give every node the same cluster_secret, or send writes on the leader's machine)", via)
}

// callerOf is the identity a vouched forward carries, if any.
func callerOf(f Forwarding, r *http.Request) (Identity, string, bool) {
	if f == nil {
		return Identity{}, "", false
	}
	caller, via, ok := f.Vouched(r)
	if !ok {
		return Identity{}, via, false
	}
	id, ok := decodeCaller(caller)
	if !ok {
		return Identity{}, via, false
	}
	id.Via = via
	return id, via, true
}
