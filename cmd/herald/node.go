package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/calendar"
	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/engine/leader"
	"github.com/heraldhq/herald/engine/schedule"
	"github.com/heraldhq/herald/plugins/host"
	"github.com/heraldhq/herald/rules"
)

// node is one running Herald node: replicated state, Raft, rules, channel
// plugins, the leader-only loops and the HTTP API, wired together.
type node struct {
	cfg   nodeConfig
	log   *slog.Logger
	fsm   *engine.FSM
	raft  *cluster.Node
	rules *rules.Set
	host  *host.Host
	zone  *time.Location // display_timezone
	srv   *http.Server
	pprof *http.Server // nil unless pprof_addr is set
	// peerHTTP asks the other members for their rule set hashes.
	peerHTTP *http.Client
	// members is raft, for peerHTTP's dialer, which exists before it.
	members atomic.Pointer[cluster.Node]
	// dirRefresh asks the leader's directory refresher for a refresh now.
	dirRefresh chan struct{}
	// callbacks are the wecom channels with a callback; callback serves
	// them (nil: none).
	callbacks wecomCallbacks
	callback  http.Handler
	// tokens, lead and reload are what a config reload (SIGHUP,
	// reload.go) changes or records; cfg stays the config the node
	// started with, live is the one in force.
	tokens *api.TokenSet
	lead   *leader.Leader
	reload reloadState

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startNode starts a node and returns once it has bootstrapped, joined or
// restarted with its data. On error everything started is stopped again.
//
// Each step finds what it needs already running (cmd/herald/DESIGN.md, "The
// node"): the listener, the rules and the plugins before Raft opens the
// data dir (so a port in use, an unreadable rules directory or a plugin
// that will not start fails before Raft touches it), the HTTP API (the join
// endpoint) before Raft starts, and the leader loops last.
func startNode(ctx context.Context, cfg nodeConfig, log *slog.Logger) (n *node, err error) {
	if cfg, err = prepareDirs(cfg); err != nil {
		return nil, err
	}
	certs, err := loadCerts(cfg, log)
	if err != nil {
		return nil, err
	}
	warnExposure(cfg, log)
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("http address %s: %w", cfg.HTTPAddr, unwrapInUse(err))
	}
	nctx, cancel := context.WithCancel(context.Background())
	n = newNode(cfg, log, certs, cancel)
	defer func() {
		if err != nil {
			// Stop first: the server's Shutdown closes the listener it
			// serves, and Serve then reports a clean stop, not an error.
			n.stop()
			_ = ln.Close()
		}
	}()

	reg, err := n.startObservability()
	if err != nil {
		return n, err
	}
	cals := calendar.NewRegistry()
	if err = n.loadRules(reg, cals); err != nil {
		return n, err
	}
	if err = n.launchPlugins(ctx, reg); err != nil {
		return n, err
	}
	if err = n.openRaft(certs, reg); err != nil {
		return n, err
	}
	schedules := scheduleFunc(cals)
	if n.callbacks, err = callbackSettings(cfg.Channels); err != nil {
		return n, err
	}
	if n.callback, err = n.callbackHandler(n.callbacks, reg); err != nil {
		return n, err
	}
	n.serveHTTP(ln, certs, reg, schedules)
	if err = n.raft.Start(ctx); err != nil {
		return n, err
	}
	run, err := n.newLeaderRun(reg, schedules)
	if err != nil {
		return n, err
	}
	n.startBackground(nctx, reg, run)
	return n, nil
}

// prepareDirs creates the data and rules directories and fills in the
// defaults that depend on the data dir (the rules directory, the mock
// channel's outbox). It comes first: everything after keeps files there.
func prepareDirs(cfg nodeConfig) (nodeConfig, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return cfg, fmt.Errorf("data dir: %w", err)
	}
	cfg = cfg.withDirDefaults()
	if err := os.MkdirAll(cfg.Rules, 0o755); err != nil {
		return cfg, fmt.Errorf("rules dir: %w", err)
	}
	return cfg, nil
}

// withDirDefaults fills in the defaults that depend on the data dir: the
// rules directory and, with no channels, the mock channel and its outbox.
// A config reload applies them too, to compare like with like.
func (c nodeConfig) withDirDefaults() nodeConfig {
	if c.Rules == "" {
		c.Rules = filepath.Join(c.DataDir, "rules")
	}
	if len(c.Channels) == 0 {
		c.Channels = map[string]map[string]any{
			"mock": {"plugin": "mock", "outbox": filepath.Join(c.DataDir, "outbox.jsonl")},
		}
	}
	return c
}

// loadCerts reads the TLS certificates when configured (nil without TLS).
// It comes before the listener so that a missing or bad certificate fails
// before any port is taken.
func loadCerts(cfg nodeConfig, log *slog.Logger) (*cluster.CertStore, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	return cluster.NewCertStore(cluster.TLSFiles{Cert: cfg.TLSCert, Key: cfg.TLSKey, CA: cfg.TLSCA}, log)
}

// warnExposure logs, once at start, what this configuration exposes to the
// network (no TLS, no cluster secret, no API tokens off loopback).
func warnExposure(cfg nodeConfig, log *slog.Logger) {
	warnInsecure(cfg, log)
	switch {
	case len(cfg.apiTokens) == 0 && !api.IsLoopbackAddr(cfg.HTTPAddr):
		log.Warn("no API tokens are configured and the HTTP address is reachable from other machines: "+
			"anyone there can read tasks, deliveries and alerts, and writes are refused unless they come from this machine; "+
			"a reverse proxy, tunnel or sidecar in front of this node needs tokens too (it would make every client local); "+
			"configure `tokens:` (see README, Securing Herald)", "http_addr", cfg.HTTPAddr)
	case len(cfg.apiTokens) == 0:
		// Loopback only, but a relay on this machine (nginx proxy_pass,
		// ssh -L, kubectl port-forward, a sidecar) turns its clients into
		// loopback callers: the only warning they get is this one.
		log.Warn("no API tokens are configured: any program on this machine may write, as admin; "+
			"a reverse proxy, tunnel or sidecar in front of this node needs `tokens:` (see README, Securing Herald)", "http_addr", cfg.HTTPAddr)
	}
	if cfg.PprofAddr != "" && !api.IsLoopbackAddr(cfg.PprofAddr) { // pprof_allow_remote: validate refuses it otherwise
		log.Warn("pprof serves profiles without auth on an address other machines can reach (pprof_allow_remote): "+
			"anyone there can read the process's memory profile, goroutines and command line", "pprof_addr", cfg.PprofAddr)
	}
}

// newNode builds the node's shell: its replicated state (restored from
// the last snapshot when Raft opens) and the node-to-node HTTP client,
// which the cluster, the status fan-out and the ops watch all share.
func newNode(cfg nodeConfig, log *slog.Logger, certs *cluster.CertStore, cancel context.CancelFunc) *node {
	// Node-to-node HTTP (join, forwarding, status fan-out) trusts, with
	// TLS, only servers whose certificate the cluster's CA signed.
	peerTr := cluster.PeerTransport()
	n := &node{cfg: cfg, log: log, fsm: newFSM(log), cancel: cancel, peerHTTP: &http.Client{Transport: peerTr, Timeout: 30 * time.Second},
		dirRefresh: make(chan struct{}, 1), tokens: api.NewTokenSet(cfg.apiTokens)}
	n.reload.start(&n.cfg)
	if certs != nil {
		peerTr.TLSClientConfig = certs.ClientConfig()
		// ... and only the member a member's address is dialled as
		// (cluster/peertls.go).
		peerTr.DialTLSContext = certs.PeerDialer(cfg.NodeID, func(addr string) string {
			if r := n.members.Load(); r != nil {
				return r.MemberAt(addr)
			}
			return ""
		})
	}
	return n
}

// startObservability resolves the display zone (the plugins and the API
// are configured with it), starts pprof when asked, and returns the metrics
// registry every later step registers into.
func (n *node) startObservability() (*prometheus.Registry, error) {
	zone, err := engine.LoadZone(displayZoneName(n.cfg.DisplayTimezone))
	if err != nil {
		return nil, err
	}
	n.zone = zone
	if n.cfg.PprofAddr != "" {
		if n.pprof, err = startPprof(n.cfg.PprofAddr, n.log); err != nil {
			return nil, err
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoCollector(readVersion()))
	return reg, nil
}

// loadRules loads the rule set. It comes before the API and the leader
// loops, which both read it; a broken rule keeps its last good version and
// is shown.
func (n *node) loadRules(reg prometheus.Registerer, cals *calendar.Registry) error {
	var err error
	// A rule naming a channel this node does not have is refused at load
	// (broken, last good version kept), not left to expire at its deadline.
	memoryLimit, _ := parseRuleMemoryLimit(n.cfg.RuleMemoryLimit) // validated by load
	// A rule whose catchup is not shorter than ledger_retention is refused
	// the same way on a reload; at start it refuses the node: this
	// ledger_retention is too short for these rules.
	_, ledger, _ := n.cfg.retentions()    // validated by load
	ruleTimeout, _, _ := n.cfg.timeouts() // validated by load
	n.rules, err = rules.Load(rules.Config{Dir: n.cfg.Rules, Logger: n.log, Registerer: reg, Calendars: cals, Channels: n.cfg.channelNames(),
		MemoryLimit: memoryLimit, CallTimeout: ruleTimeout, MaxCatchup: ledger})
	if err != nil {
		return fmt.Errorf("rules: %w", err)
	}
	if errs := n.rules.CatchupErrors(); len(errs) > 0 {
		return fmt.Errorf("config: ledger_retention %s is not longer than every rule's catchup: %w", ledger, errors.Join(errs...))
	}
	return nil
}

// launchPlugins starts the plugin host and every channel (built-ins by
// re-running this binary as `plugin serve NAME`). It needs the display
// zone (the mock writes its outbox in it) and comes before Raft, so that a
// plugin that will not start fails before Raft opens the data dir, and the
// leader loops, started last, have their channels.
func (n *node) launchPlugins(ctx context.Context, reg prometheus.Registerer) error {
	var err error
	n.host, err = host.New(host.Config{PluginsDir: n.cfg.Plugins, Channels: channelConfigs(n.cfg.Channels, n.zone.String()), Logger: n.log,
		PluginSHA256: n.cfg.PluginSHA256, PluginUser: n.cfg.PluginUser, Secrets: n.cfg.secrets()})
	if err != nil {
		return fmt.Errorf("plugins: %w", err)
	}
	reg.MustRegister(n.host.Collector())
	if err = n.host.Start(ctx); err != nil {
		return fmt.Errorf("plugins: %w", err)
	}
	return nil
}

// openRaft opens Raft over the node's FSM (restoring the last snapshot)
// without starting it: the HTTP API needs the cluster's handler before a
// join or a peer's request can arrive.
func (n *node) openRaft(certs *cluster.CertStore, reg prometheus.Registerer) error {
	cfg := n.cfg
	ccfg := cluster.Config{
		NodeID: cfg.NodeID, DataDir: cfg.DataDir, RaftAddr: cfg.RaftAddr, HTTPAddr: advertisedHTTPAddr(cfg.HTTPAddr, cfg.RaftAddr),
		Bootstrap: cfg.Bootstrap, Join: cfg.Join, NonVoter: cfg.NonVoter, Logger: n.log, Registerer: reg, RaftLogLevel: raftLogLevel(cfg),
		ClusterSecret: cfg.clusterSecret, Peers: cfg.peerList(), HTTPClient: n.peerHTTP,
		Token: nodeToken(cfg.apiTokens), ReadToken: nodeReadToken(cfg.apiTokens, cfg.clusterSecret != ""), WriteFault: cfg.writeFault,
	}
	ccfg.MaxClockSkew, _ = parseMaxClockSkew(cfg.MaxClockSkew) // validated by load
	if certs != nil {
		ccfg.TLS = certs.RaftConfig()
		ccfg.HTTPScheme = "https"
		// The member record says https, so that every node and client
		// reaching this one from the records speaks TLS to it.
		ccfg.HTTPAddr = "https://" + ccfg.HTTPAddr
	}
	if cfg.JoinTimeout != "" {
		ccfg.JoinTimeout, _ = time.ParseDuration(cfg.JoinTimeout) // validated by load
	}
	rt, _ := parseRaftTimeouts(cfg.RaftTimeouts) // validated by load
	ccfg.HeartbeatTimeout, ccfg.ElectionTimeout, ccfg.LeaderLeaseTimeout = rt.Heartbeat, rt.Election, rt.Lease
	if cfg.devTimeouts {
		ccfg = cluster.DevConfig(ccfg)
	}
	var err error
	n.raft, err = cluster.New(ccfg, n.fsm)
	n.members.Store(n.raft)
	return err
}

// scheduleFunc builds a rule's schedule: the leader fires a rule's slots
// and the API checks manual fires against the same schedules.
func scheduleFunc(cals *calendar.Registry) func(engine.Rule) (engine.Schedule, error) {
	return func(r engine.Rule) (engine.Schedule, error) {
		s, err := schedule.New(schedule.Spec{Cron: r.Schedule, Timezone: r.Timezone, Calendar: r.Calendar, Shift: r.Shift}, cals)
		if err != nil {
			return nil, err // a plain nil: a nil *Schedule in the interface would not be nil
		}
		return s, nil
	}
}

// serveHTTP serves the API on the listener bound at start. It runs before
// Raft starts: a joining member asks the leader through it, and the
// leader's first contact may come at once.
func (n *node) serveHTTP(ln net.Listener, certs *cluster.CertStore, reg prometheus.Gatherer, schedules func(engine.Rule) (engine.Schedule, error)) {
	cfg := n.cfg
	n.srv = &http.Server{
		Handler: api.New(api.Config{
			NodeID: cfg.NodeID, FSM: n.fsm, Replicator: n.raft, StatusFunc: n.status, ReadyFunc: n.ready, Cluster: n.raft.Handler(), Snapshot: n.raft.SnapshotHandler(),
			ForwardFunc: n.raft.ForwardWrites, Gatherer: reg, Logger: n.log, Rules: n.rules, ScheduleFunc: schedules,
			People: n.rules, DisplayTimezone: n.zone.String(), TokenSet: n.tokens,
			PeerSignedFunc: n.raft.PeerSigned, PeerReadFunc: n.raft.PeerRead, Forwarding: n.raft, WecomCallback: n.callback, Hosts: ownHosts(cfg),
			Directory: &api.DirectoryConfig{
				ConfiguredFunc: func() bool { return n.live().Directory != nil }, Hash: n.rules.DirectoryHash,
				Refresh: func() {
					select {
					case n.dirRefresh <- struct{}{}:
					default:
					}
				},
			},
		}),
		// TLS handshake failures (a client without the CA, plain HTTP to
		// the HTTPS port) go to the node's log, not to bare stderr.
		ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelInfo),
		// A slow client holds a connection no longer than this.
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
	}
	if certs != nil {
		// HTTPS only: a plain HTTP request to this port gets Go's "client
		// sent an HTTP request to an HTTPS server", never an API answer.
		n.srv.TLSConfig = certs.ServerConfig()
	}
	n.wg.Go(func() {
		var err error
		if certs != nil {
			err = n.srv.ServeTLS(ln, "", "")
		} else {
			err = n.srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server stopped", "err", err)
		}
	})
}

// newLeaderRun builds the leader-only loops (executor, planner, directory
// refresher) and returns what RunLeader runs while this node leads. It
// comes after Raft starts: the loops replicate through it.
func (n *node) newLeaderRun(reg prometheus.Registerer, schedules func(engine.Rule) (engine.Schedule, error)) (func(context.Context), error) {
	cfg := n.cfg
	planAhead, _ := parsePlanAhead(cfg.PlanAhead)                // validated by load
	auditRetention, _ := parseAuditRetention(cfg.AuditRetention) // validated by load
	maxClockSkew, _ := parseMaxClockSkew(cfg.MaxClockSkew)       // validated by load
	retention, ledger, _ := cfg.retentions()                     // validated by load
	_, planTimeout, _ := cfg.timeouts()                          // validated by load
	planSeconds := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herald_plan_seconds",
		Help:    "Time this node, as leader, took to plan a run: phase evaluate (the rule) or replicate (its deliveries through Raft).",
		Buckets: []float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"phase"})
	reg.MustRegister(planSeconds)
	lcfg := leader.Config{
		NodeID: cfg.NodeID, FSM: n.fsm, Replicator: n.raft, Rules: n.rules, Sender: n.host,
		ScheduleFunc: schedules, Logger: n.log,
		SchedulerConfig: leader.SchedulerConfig{RulesChanged: n.rules.Changed()},
		PlannerConfig: leader.PlannerConfig{
			PlanAhead: planAhead, PlanTimeout: planTimeout,
			PlanObserver: func(t leader.PlanTiming) {
				planSeconds.WithLabelValues("evaluate").Observe(t.Evaluate.Seconds())
				planSeconds.WithLabelValues("replicate").Observe(t.Replicate.Seconds())
			},
		},
		HousekeeperConfig: leader.HousekeeperConfig{DisplayZone: n.zone, AuditRetention: auditRetention,
			Retention: retention, LedgerRetention: ledger},
		DirectoryConfig: leader.DirectoryConfig{DirectoryRefresh: n.dirRefresh},
		EventsConfig:    leader.EventsConfig{KfSyncFunc: n.callbacks.kfSync()},
		ClockConfig: leader.ClockConfig{
			Clocks: memberClocks{node: n.raft, fsm: n.fsm}, MaxClockSkew: maxClockSkew, Transfer: n.raft.TransferLeadershipTo,
		},
	}
	if cfg.Directory != nil {
		ds, err := cfg.Directory.settings(cfg.Channels)
		if err != nil {
			return nil, err
		}
		// WeCom is not a member: its own client, without the cluster's CA.
		if lcfg.Directory, err = newWecomDirectory(ds, &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}); err != nil {
			return nil, err
		}
		lcfg.DirectoryInterval, lcfg.DirectoryMaxRemoval = ds.interval, ds.maxRemoval
	}
	l, err := leader.New(lcfg)
	if err != nil {
		return nil, err
	}
	n.lead = l
	return l.Run, nil
}

// startBackground starts what runs until stop: the directory sync, the
// leader monitor (the leader loops while this node leads), the ops watch
// and the rules watcher. It is last, so that nothing it starts meets a
// half-wired node; stop cancels them first.
func (n *node) startBackground(nctx context.Context, reg prometheus.Registerer, leaderRun func(context.Context)) {
	n.wg.Go(func() { syncDirectory(nctx, n.fsm, n.rules, n.log) })
	n.wg.Go(func() { n.raft.RunLeader(nctx, leaderRun) })
	n.startOpsWatch(nctx, reg)
	n.wg.Go(func() {
		if err := n.rules.Watch(nctx); err != nil && nctx.Err() == nil {
			n.log.Error("rules watcher stopped", "err", err)
		}
	})
}

// stop shuts the node down: a leader first hands leadership over (so that
// a planned restart costs no election: the next leader's loops start while
// these wind down), then leader loops (cancelling sends in flight), the
// rule watcher, HTTP, Raft, then the plugins.
func (n *node) stop() {
	if n.raft != nil {
		n.raft.HandOver()
	}
	n.cancel()
	if n.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := n.srv.Shutdown(ctx); err != nil {
			n.log.Warn("http shutdown", "err", err)
		}
		cancel()
	}
	n.wg.Wait()
	if n.pprof != nil {
		_ = n.pprof.Close()
	}
	if n.raft != nil {
		if err := n.raft.Shutdown(); err != nil {
			n.log.Warn("raft shutdown", "err", err)
		}
	}
	if n.host != nil {
		if err := n.host.Close(); err != nil {
			n.log.Warn("plugins shutdown", "err", err)
		}
	}
	n.peerHTTP.CloseIdleConnections()
}

func (n *node) status() api.Status {
	cs := n.raft.Status()
	st := api.Status{
		NodeID: cs.NodeID, LeaderID: cs.LeaderID, State: cs.State, Term: cs.Term,
		AppliedIndex: cs.AppliedIndex, RulesHash: n.rules.Hash(), FSMVersion: cs.FSMVersion, Build: cs.Build,
		Version: readVersion().String, DisplayTimezone: n.zone.String(),
		Members: []api.MemberStatus{}, Rules: []api.RuleStatus{}, Channels: []heraldtype.ChannelStatus{},
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusPeersTimeout)
	answers := n.peerRules(ctx, cs.Members)
	cancel()
	for i, m := range cs.Members {
		st.Members = append(st.Members, api.MemberStatus{ID: m.ID, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr, Voter: m.Voter, Suffrage: m.Suffrage,
			Leader: m.Leader, FSMVersion: m.FSMVersion, Build: m.Build, RulesHash: answers[i].Hash})
	}
	st.Warnings = append(calendarWarnings(n.rules.Rules(), time.Now()), upgradeWarnings(st.Members)...)
	st.Warnings = append(st.Warnings, directoryWarnings(n.fsm, n.rules.DirectoryHash())...)
	for _, m := range st.Members {
		if m.RulesHash != "" && m.RulesHash != st.RulesHash {
			st.RulesMismatch = true
		}
	}
	st.Rules = ruleStatuses(n.rules.Status(), n.fsm.Pauses())
	st.Channels = append(st.Channels, n.host.Status()...)
	st.Config = n.reload.status(n.zone)
	return st
}

// ruleStatuses is /v1/status rules[]: each file of the rule set, with the
// pause of the rule it defines; then each paused rule that no file here
// defines (removed or renamed while paused), with no file and no hash.
// Such a rule stays paused cluster wide, so a file that defines it again
// sends nothing until it is resumed: it is listed so that nobody forgets
// it.
func ruleStatuses(files []rules.FileStatus, pauses []*engine.Pause) []api.RuleStatus {
	paused := map[string]*engine.Pause{}
	for _, p := range pauses {
		paused[p.Rule] = p
	}
	out := make([]api.RuleStatus, 0, len(files))
	for _, f := range files {
		rs := api.RuleStatus{Name: f.Name, File: f.File, Hash: f.Hash, Error: f.Error}
		if p, ok := paused[f.Name]; ok && f.Name != "" {
			rs.Paused, rs.PausedBy, rs.PausedAt, rs.Reason, rs.Note = true, p.By, p.At, p.Reason, p.Note
			delete(paused, f.Name)
		}
		if f.Error != "" && f.Line > 0 {
			rs.Error = fmt.Sprintf("%s:%d: %s", f.File, f.Line, f.Error)
		}
		out = append(out, rs)
	}
	for _, p := range pauses {
		if _, left := paused[p.Rule]; left {
			// No file: the rule is not broken, only absent; its file and
			// hash are empty.
			out = append(out, api.RuleStatus{Name: p.Rule, Paused: true, PausedBy: p.By, PausedAt: p.At, Reason: p.Reason, Note: p.Note})
		}
	}
	return out
}

// upgradeWarnings says that a rolling upgrade is under way: commands that
// an older member could not apply wait until it runs this build.
func upgradeWarnings(members []api.MemberStatus) []string {
	var behind []string
	for _, m := range members {
		if m.FSMVersion < engine.FSMVersion {
			behind = append(behind, fmt.Sprintf("%s (FSM version %d)", m.ID, m.FSMVersion))
		}
	}
	if len(behind) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("rolling upgrade under way: %s run an older build; writes that need FSM version %d wait until every member is upgraded",
		strings.Join(behind, ", "), engine.FSMVersion)}
}

// calendarWarnings warns, from two months before it happens, that the
// statutory holiday data behind cn_workday runs out: past its last year
// cn_workday is plain Monday to Friday, and 9:00 reports would go out on
// Spring Festival.
func calendarWarnings(rules []engine.Rule, now time.Time) []string {
	uses := false
	for _, r := range rules {
		uses = uses || r.Calendar == calendar.CNWorkday
	}
	_, last := calendar.HolidayDataRange()
	if !uses || now.AddDate(0, 2, 0).Year() <= last {
		return nil
	}
	return []string{fmt.Sprintf("cn_workday knows statutory holidays up to %d only; after that it is Monday to Friday: "+
		"upgrade github.com/6tail/lunar-go, or list the holidays in a company calendar file", last)}
}

// advertisedHTTPAddr is the HTTP address the member record carries: the
// listen address, or, when that listens on every interface (0.0.0.0:PORT,
// :PORT), the Raft address's host with the HTTP port. Dialled as it is, a
// wildcard reaches the dialling machine itself, not this node; the Raft
// host is one the other members reach (the cluster refuses a wildcard
// there).
func advertisedHTTPAddr(httpAddr, raftAddr string) string {
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return httpAddr
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return httpAddr
	}
	raftHost, _, err := net.SplitHostPort(raftAddr)
	if err != nil {
		return httpAddr
	}
	return net.JoinHostPort(raftHost, port)
}

// peerClient reads another member's API as this node: through the
// node-to-node HTTP client (which, with TLS, trusts the cluster's CA),
// with the node read credential (cluster_secret) and a read token, never
// an operator's stronger one (nodeReadToken).
func (n *node) peerClient(addr string) *cluster.Client {
	return &cluster.Client{Addr: addr, HTTP: n.peerHTTP, Secret: n.cfg.clusterSecret, PeerReads: true,
		ReadToken: nodeReadToken(n.live().apiTokens, n.cfg.clusterSecret != "")}
}

// channelConfigs builds the host's channel configs. The mock channel
// writes its outbox in the node's display zone unless told otherwise.
func channelConfigs(in map[string]map[string]any, zone string) map[string]host.ChannelConfig {
	out := make(map[string]host.ChannelConfig, len(in))
	for name, raw := range in {
		cfg := map[string]any{}
		for k, v := range raw {
			if !nodeOnlyKey(k) {
				cfg[k] = v
			}
		}
		p, _ := raw["plugin"].(string)
		if _, set := cfg["timezone"]; p == "mock" && !set && zone != "" {
			cfg["timezone"] = zone
		}
		out[name] = host.ChannelConfig{Plugin: p, Config: cfg}
	}
	return out
}

// warnInsecure says at start what an operator exposes by running without
// TLS or a cluster secret on a non-loopback address.
func warnInsecure(cfg nodeConfig, log *slog.Logger) {
	if cfg.devTimeouts {
		return // herald dev: loopback by construction
	}
	loopback := api.IsLoopbackAddr(cfg.RaftAddr)
	switch {
	case cfg.TLSCert == "" && !loopback:
		log.Warn("Raft and the HTTP API run without TLS on a non-loopback address: anyone on the network can read the traffic "+
			"and talk Raft to this node; set tls_cert, tls_key and tls_ca (herald tls init)", "raft", cfg.RaftAddr)
	case cfg.clusterSecret == "" && !loopback:
		log.Warn("no cluster_secret: any node that reaches the HTTP API can ask to join this cluster; set cluster_secret on every member")
	}
	if name := nodeReadsTooStrong(cfg.apiTokens, cfg.clusterSecret != ""); name != "" {
		log.Warn("reads between nodes (status, reports, rule sets) carry token " + name + ": there is no read token and no cluster_secret; " +
			"add a token of role read, or a cluster_secret, so that no node sends a stronger token on routine reads")
	}
	if cfg.clusterSecret != "" && cfg.TLSCert == "" {
		log.Warn("cluster_secret guards joins, but without TLS the Raft transport accepts any peer: set tls_cert, tls_key and tls_ca too")
	}
}

// unwrapInUse turns "bind: address already in use" into a plainer message.
func unwrapInUse(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && errors.Is(op.Err, syscall.EADDRINUSE) {
		return errors.New("address is already in use (is another Herald running?)")
	}
	return err
}

// secrets are the node's secrets besides the channels': the API tokens
// and the cluster secret, which the plugin host redacts from every
// plugin's texts.
func (c *nodeConfig) secrets() []string {
	out := []string{}
	for _, t := range c.apiTokens {
		out = append(out, t.Secret)
	}
	if c.clusterSecret != "" {
		out = append(out, c.clusterSecret)
	}
	return out
}
