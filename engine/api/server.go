// Package api is Herald's HTTP face: status, tasks, deliveries, runs,
// alerts, statistics, manual fires and Prometheus metrics. Reads are served
// from the local replicated state; writes go to the leader (the cluster's forwarding middleware sends them
// there) and through the log.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api/reply"
	"github.com/heraldhq/herald/engine/heraldtype"
)

// Status is the body of GET /v1/status.
type Status struct {
	NodeID       string `json:"node_id"`
	LeaderID     string `json:"leader_id"`
	State        string `json:"state"`
	Term         uint64 `json:"term"`
	AppliedIndex uint64 `json:"applied_index"`
	// FSMVersion and Build are this node's own (see engine.FSMVersion).
	FSMVersion uint16 `json:"fsm_version"`
	Build      string `json:"build"`
	// Version is this node's build in one line, as `herald version`
	// prints it and the agent logs it first.
	Version   string         `json:"version"`
	Members   []MemberStatus `json:"members"`
	Rules     []RuleStatus   `json:"rules"`
	RulesHash string         `json:"rules_hash"`
	// RulesMismatch is true when members answered with different rule set
	// hashes: their rules directories differ (a deploy half done?).
	RulesMismatch bool `json:"rules_mismatch"`
	// Warnings are problems that do not stop the node but need a person,
	// e.g. calendar data about to run out.
	Warnings []string                   `json:"warnings,omitempty"`
	Channels []heraldtype.ChannelStatus `json:"channels"`
	// Role is what the caller of this request may do (read, operate or
	// admin), so that a page offers only the actions its token allows.
	Role string `json:"role,omitempty"`
	// DisplayTimezone is the node's display_timezone (IANA name): the zone
	// the dashboard shows times in.
	DisplayTimezone string `json:"display_timezone"`
	// Now is this node's clock when it answered, in the display zone: the
	// console takes "today" from it, not from the browser's clock.
	Now time.Time `json:"now"`
	// Config is when this node's config was loaded and how its last
	// reload (SIGHUP) went; absent on a node that cannot reload.
	Config *ConfigStatus `json:"config,omitempty"`
}

// ConfigStatus is /v1/status config: the config in force and the last
// reload. Times are in the display zone, with their offset.
type ConfigStatus struct {
	// LoadedAt is when the config in force was read: at start, or by the
	// last reload that succeeded.
	LoadedAt time.Time `json:"loaded_at"`
	// LastReload is the last reload tried; absent before the first.
	LastReload *ReloadStatus `json:"last_reload,omitempty"`
}

// ReloadStatus is one reload: when, whether it was applied, and why not.
// A reload that failed changed nothing.
type ReloadStatus struct {
	At    time.Time `json:"at"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
	// Changed names the settings the reload changed (tokens, channels,
	// log_level, ...); empty when the file held nothing new.
	Changed []string `json:"changed,omitempty"`
}

// MemberStatus is one cluster member in Status: the cluster's own view
// (cluster.MemberStatus, GET /v1/cluster/status) and the rule set the
// member runs, built in one place (cmd/herald's node.status). It stays a
// type of its own because the two endpoints name the FSM version
// differently (herald_fsm_version here, fsm_version there) and both names
// are contracts; one Go type would need hand-written JSON for each.
type MemberStatus struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Voter    bool   `json:"voter"`
	// Suffrage is "voter" or "nonvoter" (a read replica).
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
	// RulesHash is the hash of the rule set the member runs, as it answered
	// just now; empty when it did not answer.
	RulesHash string `json:"rules_hash,omitempty"`
	// FSMVersion is the replicated-log version the member's build applies
	// (1 for builds from before versions); Build names that build.
	FSMVersion uint16 `json:"herald_fsm_version"`
	Build      string `json:"build,omitempty"`
}

// RuleStatus is one rule file in Status; Error is set while the file's
// newest version fails (its last good version keeps running).
type RuleStatus struct {
	Name  string `json:"name"`
	File  string `json:"file"`
	Hash  string `json:"hash"`
	Error string `json:"error,omitempty"`
	// Paused is true while the rule is paused (replicated: the same on
	// every node), with who paused it, when, and why.
	Paused   bool      `json:"paused"`
	PausedBy string    `json:"paused_by,omitempty"`
	PausedAt time.Time `json:"paused_at,omitzero"`
	Reason   string    `json:"reason,omitempty"`
	// Note is what the pausing client typed; paused_by is the verified
	// caller (a token's name, "loopback").
	Note string `json:"note,omitempty"`
}

// Config wires the server to the node's parts.
type Config struct {
	NodeID     string
	FSM        *engine.FSM
	Replicator engine.Replicator
	// StatusFunc assembles the node's status from cluster, rules and plugins.
	StatusFunc func() Status
	// ReadyFunc checks the node's readiness for GET /v1/ready (probe.go);
	// nil answers 503.
	ReadyFunc func(context.Context) Readiness
	// WecomCallback serves GET and POST /v1/wecom/callback/{channel}
	// (plugins/wecom/callback): WeCom's callbacks, verified by their
	// signature, no token.
	WecomCallback http.Handler
	// Cluster serves /v1/cluster/ (join, leave, remove, status).
	Cluster http.Handler
	// Snapshot serves GET /v1/snapshot (a backup, streamed) and PUT
	// /v1/snapshot (a restore) (cluster.Node.SnapshotHandler).
	Snapshot http.Handler
	// ForwardFunc wraps the whole API so that writes reach the leader.
	ForwardFunc func(http.Handler) http.Handler
	Gatherer    prometheus.Gatherer
	Logger      *slog.Logger
	// Rules, when set, validates task rules and serves manual fires
	// (POST /v1/rules/{name}/fire answers 503 without it).
	Rules engine.RuleSource
	// NowFunc stamps writes (task submissions, cancels, fires); default
	// time.Now.
	NowFunc func() time.Time
	// FireHorizon is how far back POST /v1/rules/{name}/fire may fire a
	// slot; default engine.LedgerRetentionDefault. Keep it within the
	// leader's LedgerRetention: an older slot may have fired and been
	// pruned from the ledger, and would fire a second time.
	FireHorizon time.Duration
	// ScheduleFunc builds a rule's schedule, as the leader's does
	// (engine/schedule.New). When set, a manual fire of an explicit slot
	// that is not one of the schedule's is refused: its run key would
	// differ from the scheduler's, and the slot meant would fire as well.
	ScheduleFunc func(engine.Rule) (engine.Schedule, error)
	// Tokens are the API tokens (README "Securing Herald"). With none,
	// anyone may read and only loopback connections may write.
	Tokens []Token
	// Hosts are the names and addresses (host or host:port) this node
	// answers to without tokens besides loopback ones: its http_addr host
	// (local.go). A request under any other Host is refused then.
	Hosts []string
	// TokenSet, when set, is used instead of Tokens: the node replaces
	// its tokens on a config reload.
	TokenSet *TokenSet
	// PeerSignedFunc reports a node-to-node request that its handler
	// authenticates by the cluster secret (cluster.Node.PeerSigned).
	// Without tokens such a request may come from another machine.
	PeerSignedFunc func(*http.Request) bool
	// PeerReadFunc reports a member's read that proves the cluster secret
	// (cluster.Node.PeerRead): taken as role read without a token.
	PeerReadFunc func(*http.Request) bool
	// People, when set, gives display names for userids (every delivery
	// carries recipient_name) and lets GET /v1/deliveries?recipient= find
	// a person by name.
	People People
	// DisplayTimezone is the IANA zone people read times in (the
	// dashboard's default and GET /v1/stats's default date); empty means
	// DefaultDisplayTimezone.
	DisplayTimezone string
	// Directory serves /v1/directory (the snapshot in force and the held
	// refresh are read from FSM either way).
	Directory *DirectoryConfig
	// Forwarding carries the caller of a forwarded write to the leader
	// (cluster.Node); nil on a node that never forwards.
	Forwarding Forwarding
}

// People resolves the people data of the rules directory for display.
// Implementations must be safe for concurrent use.
type People interface {
	// DisplayName is the person's name, "" when unknown.
	DisplayName(userid string) string
	// Find returns the userids whose userid or name equals query
	// (case-insensitively), at most limit of them.
	Find(query string, limit int) []string
}

// New returns the API handler.
func New(cfg Config) http.Handler {
	s := &server{cfg: cfg}
	s.tasks = newTaskGroup(s)
	if s.cfg.Logger == nil {
		s.cfg.Logger = slog.Default()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.status)
	mux.HandleFunc("GET /v1/health", s.health)
	mux.HandleFunc("GET /v1/ready", s.ready)
	mux.HandleFunc("GET /v1/deliveries", s.deliveries)
	mux.HandleFunc("GET /v1/deliveries/export", s.exportDeliveries)
	mux.HandleFunc("GET /v1/deliveries/{id}", s.delivery)
	mux.HandleFunc("GET /v1/runs", s.runs)
	mux.HandleFunc("GET /v1/alerts", s.alerts)
	mux.HandleFunc("GET /v1/tasks", s.listTasks)
	mux.HandleFunc("GET /v1/tasks/{key}", s.getTask)
	mux.HandleFunc("GET /v1/stats", s.stats)
	mux.HandleFunc("GET /v1/rules/hash", s.rulesHash)
	mux.HandleFunc("GET /v1/directory", s.getDirectory)
	mux.HandleFunc("GET /v1/directory/snapshot", s.getDirectorySnapshot)
	mux.HandleFunc("GET /v1/audit", s.audit)
	mux.HandleFunc("GET /v1/events/{id}", s.getEvent)
	// Every write names its audit action (audit.go), and its target when
	// the path holds it.
	mux.HandleFunc("POST /v1/alerts/{id}/ack", audited("alert.ack", "id", s.ackAlert))
	mux.HandleFunc("POST /v1/tasks", audited("task.submit", "", s.submitTask))
	mux.HandleFunc("DELETE /v1/tasks/{key}", audited("task.cancel", "key", s.cancelTask))
	mux.HandleFunc("PUT /v1/tasks/{key}", audited("task.replace", "key", s.replaceTask))
	mux.HandleFunc("POST /v1/events", audited("event.record", "", s.recordEvent))
	mux.HandleFunc("POST /v1/rules/{name}/fire", audited("rule.fire", "name", s.fireRule))
	mux.HandleFunc("POST /v1/rules/{name}/pause", audited("rule.pause", "name", s.pauseRule))
	mux.HandleFunc("POST /v1/rules/{name}/resume", audited("rule.resume", "name", s.resumeRule))
	mux.HandleFunc("POST /v1/deliveries/retry", audited("delivery.retry", "", s.retryMany))
	mux.HandleFunc("POST /v1/deliveries/{id}/retry", audited("delivery.retry", "id", s.retryOne))
	mux.HandleFunc("POST /v1/deliveries/recall", audited("delivery.recall", "", s.recallDeliveries))
	mux.HandleFunc("POST /v1/runs/{key}/approve", audited("run.approve", "key", s.approveRun))
	mux.HandleFunc("POST /v1/runs/{key}/reject", audited("run.reject", "key", s.rejectRun))
	mux.HandleFunc("POST /v1/directory/confirm", audited("directory.confirm", "", s.confirmDirectory))
	mux.HandleFunc("POST /v1/directory/refresh", audited("directory.refresh", "", s.refreshDirectory))
	if cfg.WecomCallback != nil {
		// Public: WeCom's msg_signature is the credential (auth.go), and
		// not audited: the event it records is its trace (audit.go).
		mux.Handle("GET /v1/wecom/callback/{channel}", cfg.WecomCallback)
		mux.Handle(wecomCallbackPOST, cfg.WecomCallback)
	}
	if cfg.Cluster != nil {
		mux.Handle("/v1/cluster/", cfg.Cluster)
	}
	if cfg.Snapshot != nil {
		// A save is a read, and reads are not recorded (audit.go); the
		// restore is recorded after it, so its record survives it.
		mux.Handle("GET /v1/snapshot", cfg.Snapshot)
		mux.HandleFunc("PUT /v1/snapshot", audited("snapshot.restore", "", cfg.Snapshot.ServeHTTP))
	}
	own := prometheus.NewRegistry()
	if cfg.FSM != nil {
		own.MustRegister(newCollector(cfg.FSM))
	}
	gatherers := prometheus.Gatherers{own}
	if cfg.Gatherer != nil {
		gatherers = append(gatherers, cfg.Gatherer)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherers, promhttp.HandlerOpts{}))
	mux.Handle("GET /ui/", dashboard())
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// This catch-all matches every method, so the mux never answers
		// 405 itself: a path served for other methods is told so here.
		if allow := allowed(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	var h http.Handler = prettyJSON(mux)
	if cfg.ForwardFunc != nil {
		h = cfg.ForwardFunc(h)
	}
	// Outside forwarding: a follower sees the leader's answer and leaves
	// the record to the leader; inside auth: it needs the caller.
	audit := newAuditor(s, own)
	h = audit.middleware(h)
	// Who may do what is decided here, once for every route (RouteRole),
	// and before forwarding: a follower forwards only what the caller may
	// do, with the caller's own Authorization header.
	auth := newAuthenticator(cfg.Tokens, cfg.TokenSet, cfg.Hosts)
	auth.peerSigned = cfg.PeerSignedFunc
	auth.peerRead = cfg.PeerReadFunc
	auth.forwarding = cfg.Forwarding
	h = auth.middleware(h)
	// A node listens where the operator's browser can reach it: without
	// this, any page open there could fire rules, submit tasks or ack
	// alerts with a form or a no-cors fetch. Browsers mark cross-site
	// requests (Sec-Fetch-Site, Origin); the CLI, curl and other nodes send
	// neither and pass. Checked before forwarding, so a refused write never
	// reaches the leader.
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross-origin "+r.Method+" refused: writes come from this node's own pages, the CLI or API clients")
	}))
	// Refusals are counted outermost: a 401 or a cross-site 403 counts too.
	return audit.countRefused(csrf.Handler(h))
}

type server struct {
	cfg Config
	// tasks groups the task submissions that arrive together into one
	// entry (group_commit.go).
	tasks *groupCommit[engine.SubmitTask]
}

// allowed lists the methods that mux serves on r's path (other than the
// catch-all "/").
func allowed(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodPatch, http.MethodPost, http.MethodPut} {
		probe := r.WithContext(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			out = append(out, m)
		}
	}
	return out
}

func (s *server) status(w http.ResponseWriter, r *http.Request) {
	st := s.cfg.StatusFunc()
	st.Now = s.now().In(s.displayZone())
	if id, ok := IdentityFrom(r.Context()); ok && id.Role > RolePublic {
		st.Role = id.Role.String()
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *server) delivery(w http.ResponseWriter, r *http.Request) {
	d, ok := s.findDelivery(w, r.PathValue("id"))
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.deliveryViews([]*engine.Delivery{d})[0])
}

// findDelivery resolves a delivery id or a unique prefix of at least
// engine.MinIDPrefix characters, answering 404 (none) or 409 (several)
// itself.
func (s *server) findDelivery(w http.ResponseWriter, id string) (*engine.Delivery, bool) {
	d, err := s.cfg.FSM.FindDelivery(id)
	if err != nil {
		writePrefixError(w, "delivery", id, err)
		return nil, false
	}
	return d, true
}

// writePrefixError answers a failed id lookup: 409 with the candidates
// when the prefix is ambiguous, else 404.
func writePrefixError(w http.ResponseWriter, what, id string, err error) {
	var amb *engine.AmbiguousError
	if errors.As(err, &amb) {
		writeJSON(w, http.StatusConflict, reply.With(amb.Error(), map[string]any{"matches": amb.Matches}))
		return
	}
	msg := fmt.Sprintf("no %s %s", what, id)
	if len(id) < engine.MinIDPrefix {
		msg += fmt.Sprintf(" (give the full id or at least %d characters of it)", engine.MinIDPrefix)
	}
	writeError(w, http.StatusNotFound, msg)
}

func (s *server) runs(w http.ResponseWriter, r *http.Request) {
	if !onlyParams(w, r, "rule", "limit") {
		return
	}
	rule := r.URL.Query().Get("rule")
	limit, err := intParam(r.URL.Query().Get("limit"), 100, 10000)
	if err != nil {
		writeFieldError(w, &FieldError{"limit", err.Error()})
		return
	}
	runs := s.cfg.FSM.Runs(func(run *engine.Run) bool { return rule == "" || run.Rule == rule })
	total := len(runs)
	if len(runs) > limit {
		runs = runs[len(runs)-limit:]
	}
	type view struct {
		*engine.Run
		State string `json:"state"`
		// Nobody: the run is planned and its rule planned no recipient (a
		// task or fire whose data matched no one): done, but no one told.
		Nobody bool `json:"planned_nobody"`
	}
	items, err := encodeNewest(runs, maxListBytes, func(run *engine.Run) any {
		return view{run, run.State.String(), run.State == engine.RunPlanned && run.Planned == 0}
	})
	if err != nil {
		s.writeApplyError(w, err)
		return
	}
	body := map[string]any{"total": total, "runs": items}
	if len(items) < len(runs) {
		body["truncated"] = truncatedReason
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *server) alerts(w http.ResponseWriter, r *http.Request) {
	if !onlyParams(w, r) {
		return
	}
	alerts := s.cfg.FSM.Alerts()
	items, err := encodeBounded(alerts, maxListBytes, func(a *engine.Alert) any { return s.alertView(a) })
	if err != nil {
		s.writeApplyError(w, err)
		return
	}
	body := map[string]any{"alerts": items} // [] for a client to iterate, never null
	if len(items) < len(alerts) {
		body["truncated"] = truncatedReason
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *server) ackAlert(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if al, err := s.cfg.FSM.FindAlert(id); err == nil {
		id = al.ID
		if al.Acked {
			setUnchanged(r) // acked again: answered 200, changes nothing
		}
	} else {
		var amb *engine.AmbiguousError
		if errors.As(err, &amb) {
			writePrefixError(w, "alert", id, err)
			return
		}
	}
	setTarget(r, id)
	_, err := s.apply(r.Context(), engine.CmdAckAlert, engine.AckAlert{ID: id})
	// The state machine refuses an unknown id with a plain error; any other
	// failure (no leader, a timeout) is not the caller's mistake.
	unknown := false
	if err != nil && !errors.Is(err, engine.ErrNotLeader) {
		_, found := s.cfg.FSM.Alert(id)
		unknown = !found
	}
	switch {
	case unknown:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no alert %q", id))
	case err != nil:
		s.writeApplyError(w, err)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "acked": true})
	}
}

func validState(s string) bool {
	for st := engine.StatePending; st <= engine.StateRecalled; st++ {
		if st.String() == s {
			return true
		}
	}
	return false
}

func intParam(s string, def, most int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > most {
		return 0, errors.New("want a whole number from 1 to " + strconv.Itoa(most))
	}
	return n, nil
}

// writeJSON answers with v as compact JSON, indented on ?pretty=1.
func writeJSON(w http.ResponseWriter, code int, v any) {
	reply.JSON(w, code, v, isPretty(w))
}

// writeError answers with the error envelope shared with the cluster's
// endpoints (reply.Error).
func writeError(w http.ResponseWriter, code int, reason string) {
	reply.Error(w, code, reason, isPretty(w))
}

// RulesHashView is the body of GET /v1/rules/hash: what one node runs. Nodes
// ask each other for it to flag rule sets that differ.
type RulesHashView struct {
	NodeID    string `json:"node_id"`
	RulesHash string `json:"rules_hash"`
	// Broken lists the node's rule files whose newest version does not
	// load ("file:line: message"; the last good version runs), so the
	// leader can alert for a broken file on any node.
	Broken []string `json:"broken,omitempty"`
}

func (s *server) rulesHash(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.Rules == nil {
		writeError(w, http.StatusServiceUnavailable, "no rule set on this node")
		return
	}
	v := RulesHashView{NodeID: s.cfg.NodeID, RulesHash: s.cfg.Rules.Hash()}
	if b, ok := s.cfg.Rules.(interface{ Broken() []string }); ok {
		v.Broken = b.Broken()
	}
	writeJSON(w, http.StatusOK, v)
}
