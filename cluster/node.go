package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/hclogslog"
)

// logCacheSize is how many of the newest log entries raft keeps in
// memory beside the store. A plan's entries are up to a few hundred KB
// each: 512 of them took 34 MiB on every node after a 100,000-person
// burst. 64 is raft's largest append batch (MaxAppendEntries); a follower
// further behind reads the store.
const logCacheSize = 64

// Errors returned by Node.
var (
	// ErrNoLeader means no leader is known right now (an election is under
	// way, or there is no quorum).
	ErrNoLeader = errors.New("no leader elected")
	// ErrDataDirInUse means another process (or Node) holds the data dir.
	ErrDataDirInUse = errors.New("data dir is in use by another node")
	// ErrShutdown is returned by a Node that has been shut down.
	ErrShutdown = errors.New("cluster node is shut down")
)

// Start modes, recorded for Status and tests.
const (
	startBootstrap = "bootstrap"
	startJoin      = "join"
	startExisting  = "existing"
	startWait      = "wait"
	// startRejoin: the data dir was empty and --bootstrap given, but the
	// cluster this node belonged to is alive: it rejoined as the same member.
	startRejoin = "rejoin"
)

// Node is one Herald cluster member: a raft.Raft around the engine's state
// machine, plus join, forwarding and leadership monitoring.
type Node struct {
	cfg    Config
	log    *slog.Logger
	sm     StateMachine
	raft   *raft.Raft
	store  *raftboltdb.BoltStore
	snaps  *raft.FileSnapshotStore
	stores *storeWatch // failed writes of the log, stable store and snapshots
	stream *streamLayer
	client *http.Client
	ownTr  *http.Transport // closed on Shutdown when the client is ours
	peer   *peerAuth       // checks node-to-node requests
	// refused counts and rate-limits the log of refused proofs (refusals.go).
	refused *refusals

	hasState  bool
	startMode string

	idMu      sync.Mutex
	clusterID string // see ClusterID

	leaderMu  sync.Mutex
	leaderFor leaderTarget // see targetForLeader

	refusedMu sync.Mutex
	refusedAt map[string]time.Time // refusedRaftPeer: last log per certificate name

	reportsMu sync.Mutex
	reports   map[string]MemberReport // the leader's latest poll (memberreport.go)

	leaderOffset atomic.Int64 // see LeaderClockOffset (leaderclock.go)

	progress leaderProgress // the leader's applied index, for Ready (ready.go)

	// token replaces cfg.Token once SetToken was called (a config reload).
	token atomic.Pointer[[2]string]

	leadership *leadership
	metrics    *metrics
	timings    *raftTimings // append and snapshot latency (raftmetrics.go)

	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup

	// runners counts RunLeader calls in progress; Shutdown waits for them
	// (and so for their lead funcs) before it stops Raft. runMu orders
	// their Add against Shutdown's close of shutdownCh and Wait.
	runMu   sync.Mutex
	runners sync.WaitGroup
	// leadPauses reach RunLeader (withoutLeadWork); leadRunning says one
	// is there to take them.
	leadPauses  chan leadPause
	leadRunning atomic.Bool

	shutdownOnce sync.Once
	shutdownErr  error
	shutdownCh   chan struct{}

	// beforeRaftShutdown, set by tests, runs in Shutdown just before Raft
	// stops. noHandOver, set by tests, makes Shutdown stop a leader as a
	// crash would: without handing leadership over.
	beforeRaftShutdown func()
	noHandOver         bool

	// failed closes when the node finds it must not go on (see Failed).
	failOnce sync.Once
	failErr  error
	failed   chan struct{}
}

var _ engine.Replicator = (*Node)(nil)

// New opens the Raft stores and transport in cfg.DataDir and starts Raft.
// It neither bootstraps nor joins: Start does.
func New(cfg Config, sm StateMachine) (*Node, error) {
	if sm == nil {
		return nil, fmt.Errorf("%w: state machine is nil", ErrInvalidConfig)
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		if cfg.RaftListener != nil {
			cfg.RaftListener.Close()
		}
		return nil, err
	}
	level, _ := parseLevel(cfg.RaftLogLevel)
	hlog := hclogslog.New(cfg.Logger, hclogslog.Options{Name: "raft", Level: level})
	n := &Node{
		cfg:        cfg,
		log:        cfg.Logger.With("component", "cluster", "node_id", cfg.NodeID),
		sm:         sm,
		shutdownCh: make(chan struct{}),
		failed:     make(chan struct{}),
		leadPauses: make(chan leadPause),
		leadership: newLeadership(),
		peer:       newPeerAuth(cfg.ClusterSecret),
	}
	n.refused = newRefusals(n.log, cfg.NodeID)
	n.bgCtx, n.bgCancel = context.WithCancel(context.Background())
	n.client = cfg.HTTPClient
	if n.client == nil {
		n.ownTr = PeerTransport()
		n.client = &http.Client{Transport: n.ownTr, Timeout: 30 * time.Second}
	}

	ok := false
	defer func() {
		if !ok {
			n.closeResources()
		}
	}()

	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	store, err := openStore(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	n.store = store
	if id, err := store.Get(clusterIDKey); err == nil {
		n.clusterID = string(id)
	}
	if err := recordNodeID(store, cfg.NodeID); err != nil {
		return nil, err
	}
	if err := checkSnapshotMeta(cfg.DataDir); err != nil {
		return nil, err
	}
	n.stores = newStoreWatch(cfg.WriteRecovery, cfg.WriteFault)
	n.timings = newRaftTimings(cfg.NodeID)
	installRaftSink()
	watched := watchedLogStore{LogStore: store, stable: store, w: n.stores, appendSeconds: n.timings.append}
	logs, err := raft.NewLogCache(logCacheSize, watched)
	if err != nil {
		return nil, fmt.Errorf("raft log cache: %w", err)
	}
	n.snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotRetain, hlog)
	if err != nil {
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	n.hasState, err = raft.HasExistingState(logs, store, n.snaps)
	if err != nil {
		return nil, fmt.Errorf("read raft state: %w", err)
	}

	n.stream, err = listen(cfg.RaftAddr, cfg.RaftListener, cfg.TLS, cfg.DialTimeout)
	if err != nil {
		return nil, err
	}
	trans := newTransport(n.stream, cfg.DialTimeout, hlog)

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = hlog
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.NotifyCh = n.leadership.notify
	if err := raft.ValidateConfig(rc); err != nil {
		trans.Close()
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	firstIndex, err := logs.FirstIndex()
	if err != nil {
		trans.Close()
		return nil, fmt.Errorf("read raft log: %w", err)
	}
	n.leadership.start()
	rfsm := &fsm{sm: sm, starting: true, firstIndex: firstIndex, dataDir: cfg.DataDir, snapshotSeconds: n.timings.snapshot}
	n.raft, err = raft.NewRaft(rc, rfsm, logs, watched, snapshotWatch{watchedSnapshots{n.snaps, n.stores}, rfsm}, trans)
	rfsm.started()
	if err != nil {
		trans.Close()
		if cause := rfsm.lastRestoreErr(); cause != nil {
			return nil, fmt.Errorf("start raft: %w: %w", err, cause)
		}
		return nil, fmt.Errorf("start raft: %w", err)
	}
	if cfg.TLS != nil {
		n.refusedAt = map[string]time.Time{}
		n.stream.check.Store(&peerCheck{admit: n.admitRaftPeer, refused: n.refusedRaftPeer})
		if own := ownCertificate(cfg.TLS); own == nil || !certNames(own, cfg.NodeID) {
			n.log.Warn("raft peers are checked by CA alone: this node's certificate's common name is not its node id, so a removed member's certificate still opens raft connections (issue certificates named by node id: herald tls init --nodes)",
				"node_id", cfg.NodeID)
		}
	}
	n.metrics = newMetrics(n, rfsm, cfg.Registerer)
	ok = true
	return n, nil
}

// handlerDrainTimeout bounds the wait at shutdown for raft's connection
// handlers: an RPC in flight answers ErrTransportShutdown at once, so they
// return within a store write.
const handlerDrainTimeout = 5 * time.Second

// closeResources releases what New opened, in reverse order.
func (n *Node) closeResources() {
	if n.raft == nil && n.stream != nil {
		n.stream.Close()
	}
	if n.raft == nil && n.stream == nil && n.cfg.RaftListener != nil {
		n.cfg.RaftListener.Close()
	}
	n.leadership.stop()
	if n.stream != nil {
		// raft.Shutdown closed the stream (or the line above did); its
		// connection handlers may still be writing to the store.
		n.stream.Close()
		if !n.stream.awaitHandlers(handlerDrainTimeout) {
			n.log.Warn("raft connection handlers still running at shutdown; closing the store under them", "waited", handlerDrainTimeout)
		}
	}
	if n.store != nil {
		n.store.Close()
	}
	if n.ownTr != nil {
		n.ownTr.CloseIdleConnections()
	}
}

// Start brings the node into a cluster: a node with existing Raft state just
// resumes (never bootstraps again); otherwise it bootstraps (cfg.Bootstrap),
// joins through cfg.Join, or waits to be added by `herald cluster join`.
// It returns once bootstrapped (and elected) or joined, or on failure.
func (n *Node) Start(ctx context.Context) error {
	if err := n.start(ctx); err != nil {
		return err
	}
	n.bg.Go(func() { n.watchClusterID(n.bgCtx) })
	n.bg.Go(func() { n.watchLeaderClock(n.bgCtx) })
	if n.cfg.TLS != nil {
		n.bg.Go(func() { n.sweepRaftPeers(n.bgCtx) })
	}
	return nil
}

func (n *Node) start(ctx context.Context) error {
	switch {
	case n.hasState:
		n.startMode = startExisting
		if n.cfg.Join != "" {
			if err := n.checkSameCluster(ctx, n.cfg.Join); err != nil {
				return err
			}
		}
		n.log.Info("resuming with existing raft state", "raft_addr", n.cfg.RaftAddr)
		n.bg.Go(func() { n.reconcileSelf(n.bgCtx) })
		n.bg.Go(func() { n.learnClusterID(n.bgCtx) })
		return nil
	case n.cfg.Bootstrap:
		if rejoined, err := n.guardBootstrap(ctx); err != nil || rejoined {
			return err
		}
		n.startMode = startBootstrap
		n.log.Info("bootstrapping a new cluster", "raft_addr", n.cfg.RaftAddr)
		// Drawn anew if a crash comes before the bootstrap: then the node
		// has no state and bootstraps again.
		id, err := newClusterID()
		if err != nil {
			return fmt.Errorf("bootstrap: cluster id: %w", err)
		}
		if err := n.setClusterID(id); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
		f := n.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(n.cfg.NodeID),
			Address:  raft.ServerAddress(n.cfg.RaftAddr),
		}}})
		if err := f.Error(); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
		return n.waitLeader(ctx)
	case n.cfg.Join != "":
		n.startMode = startJoin
		return n.joinVia(ctx, n.cfg.Join)
	default:
		n.startMode = startWait
		n.log.Warn("no raft state, not bootstrapping and nothing to join: waiting to be added (herald cluster join)")
		n.bg.Go(func() { n.learnClusterID(n.bgCtx) })
		return nil
	}
}

// clientFor is a client for another node's API with this node's HTTP
// client, scheme and cluster secret.
func (n *Node) clientFor(addr string) *Client {
	return &Client{Addr: addr, HTTP: n.client, Scheme: n.cfg.HTTPScheme, Secret: n.cfg.ClusterSecret, Token: n.apiToken(),
		PeerReads: true, ReadToken: n.apiReadToken(), ClusterID: n.ClusterID()}
}

// SetTokens replaces the API tokens this node presents to the other
// members (Config.Token and ReadToken): the node's tokens were reloaded.
func (n *Node) SetTokens(token, readToken string) {
	n.token.Store(&[2]string{token, readToken})
}

func (n *Node) apiToken() string {
	if t := n.token.Load(); t != nil {
		return t[0]
	}
	return n.cfg.Token
}

func (n *Node) apiReadToken() string {
	if t := n.token.Load(); t != nil {
		return t[1]
	}
	return n.cfg.ReadToken
}

// waitLeader waits until some leader is known.
func (n *Node) waitLeader(ctx context.Context) error {
	return poll(ctx, n.shutdownCh, 20*time.Millisecond, func() bool {
		_, id := n.raft.LeaderWithID()
		return id != ""
	})
}

// poll calls done every interval until it reports true, ctx ends or stop
// closes.
func poll(ctx context.Context, stop <-chan struct{}, interval time.Duration, done func() bool) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return ErrShutdown
		case <-t.C:
		}
	}
	return nil
}

// Apply replicates cmd and returns the state machine's response. On a
// follower it fails with engine.ErrNotLeader. If the response is an error
// value, it is returned as the error. A ctx already done proposes nothing;
// one cancelled while waiting returns early, but the command may still
// commit.
func (n *Node) Apply(ctx context.Context, cmd []byte) (any, error) {
	if n.raft.State() != raft.Leader {
		return nil, n.errNotLeader()
	}
	if err := ctx.Err(); err != nil {
		return nil, err // not proposed: the caller knows it did not happen
	}
	cmd, err := n.sm.Admit(cmd)
	if err != nil {
		n.log.Warn("write refused for a rolling upgrade", "err", err)
		return nil, err // not proposed: a member could not apply it
	}
	f := n.raft.Apply(cmd, n.timeout(ctx))
	if err := wait(ctx, f); err != nil {
		return nil, mapRaftErr(err)
	}
	resp := f.Response()
	if err, ok := resp.(error); ok {
		return nil, err
	}
	return resp, nil
}

// VerifyLeader confirms with a quorum that this node still leads.
func (n *Node) VerifyLeader(ctx context.Context) error {
	if n.raft.State() != raft.Leader {
		return n.errNotLeader()
	}
	return mapRaftErr(wait(ctx, n.raft.VerifyLeader()))
}

// errNotLeader is engine.ErrNotLeader, also matching ErrShutdown once the
// node is shut down.
func (n *Node) errNotLeader() error {
	select {
	case <-n.shutdownCh:
		return fmt.Errorf("%w: %w", engine.ErrNotLeader, ErrShutdown)
	default:
		return engine.ErrNotLeader
	}
}

// timeout is the raft-side bound for one operation: ApplyTimeout, or less
// if ctx has an earlier deadline.
func (n *Node) timeout(ctx context.Context) time.Duration {
	d := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < d {
			d = max(left, time.Millisecond)
		}
	}
	return d
}

// wait waits for a raft future or ctx, whichever ends first. raft futures
// cannot be cancelled: the waiting goroutine ends when raft resolves the
// future (it always does, at the latest on its timeout or shutdown).
func wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mapRaftErr turns raft's leadership errors into engine.ErrNotLeader (still
// wrapping raft's, which says whether the outcome is unknown). A shut-down
// node does not lead either: raft's shutdown error matches both
// engine.ErrNotLeader and ErrShutdown.
func mapRaftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %w", engine.ErrNotLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w: %w", engine.ErrNotLeader, ErrShutdown, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		// The leader is too busy to take the command in time: a timeout
		// like any other, which callers may retry.
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return err
}

// IsLeader reports whether this node currently leads (without asking a
// quorum; use VerifyLeader before acting on it).
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// LeaderHTTPAddr is the leader's HTTP address from the replicated member
// records, or "" when no leader is known or it has no record yet.
func (n *Node) LeaderHTTPAddr() string {
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return ""
	}
	return n.memberHTTP(string(id))
}

// leaderID is the id of the leader this node knows of, "" for none.
func (n *Node) leaderID() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}

func (n *Node) memberHTTP(id string) string {
	if id == n.cfg.NodeID {
		return n.cfg.HTTPAddr
	}
	for _, m := range n.sm.Members() {
		if m.ID == id {
			return m.HTTPAddr
		}
	}
	return ""
}

// Status is a node's view of the cluster, served at GET /v1/cluster/status.
type Status struct {
	NodeID string `json:"node_id"`
	// ClusterID tells clusters apart; "" until this node has learnt it.
	ClusterID    string `json:"cluster_id,omitempty"`
	RaftAddr     string `json:"raft_addr"`
	HTTPAddr     string `json:"http_addr"`
	LeaderID     string `json:"leader_id"`
	State        string `json:"state"`
	Term         uint64 `json:"term"`
	AppliedIndex uint64 `json:"applied_index"`
	// FSMVersion and Build are this node's build (see engine.FSMVersion):
	// the leader reads them to know what every member can apply.
	FSMVersion uint16 `json:"fsm_version"`
	Build      string `json:"build"`
	// PeerAuth is the node-to-node proof format this node reads
	// (PeerAuthVersion); builds before it report none (0): they read only
	// the older format, which a sender then uses for them.
	PeerAuth int            `json:"peer_auth"`
	Members  []MemberStatus `json:"members"`
}

// MemberStatus is one server of the Raft configuration. GET /v1/status
// serves it with the member's rule set as api.MemberStatus (see there why
// that is a type of its own).
type MemberStatus struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Voter    bool   `json:"voter"`
	// Suffrage is "voter" or "nonvoter" (a read replica: it votes on
	// nothing and never leads).
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
	// FSMVersion is the FSM version the member's build applies, as the
	// replicated record has it (1 for builds before FSM versions).
	FSMVersion uint16 `json:"fsm_version"`
	Build      string `json:"build,omitempty"`
}

// Status reports this node's view of the cluster. Members come from the
// Raft configuration, with HTTP addresses from the replicated records.
func (n *Node) Status() Status {
	_, leader := n.raft.LeaderWithID()
	st := Status{
		NodeID:       n.cfg.NodeID,
		ClusterID:    n.ClusterID(),
		RaftAddr:     n.cfg.RaftAddr,
		HTTPAddr:     n.cfg.HTTPAddr,
		LeaderID:     string(leader),
		State:        strings.ToLower(n.raft.State().String()),
		Term:         n.raft.CurrentTerm(),
		AppliedIndex: n.raft.AppliedIndex(),
		FSMVersion:   engine.FSMVersion,
		Build:        engine.Build,
		PeerAuth:     PeerAuthVersion,
		Members:      []MemberStatus{},
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return st
	}
	records := map[string]engine.Member{}
	for _, m := range n.sm.Members() {
		records[m.ID] = m
	}
	records[n.cfg.NodeID] = n.selfMember()
	for _, s := range f.Configuration().Servers {
		m := records[string(s.ID)]
		st.Members = append(st.Members, MemberStatus{
			ID:         string(s.ID),
			RaftAddr:   string(s.Address),
			HTTPAddr:   m.HTTPAddr,
			Voter:      s.Suffrage == raft.Voter,
			Suffrage:   suffrage(s.Suffrage),
			Leader:     s.ID == leader,
			FSMVersion: m.AppliesFSM(),
			Build:      m.Build,
		})
	}
	return st
}

// Shutdown hands leadership over when this node leads (HandOver), stops
// background work, the leader work of RunLeader (and waits for it to
// return), then Raft, and closes the stores. It does not leave the
// cluster: a restart with the same data dir resumes. Do not call it from
// inside a lead func: it would wait for itself.
func (n *Node) Shutdown() error {
	n.shutdownOnce.Do(func() {
		if !n.noHandOver {
			n.HandOver()
		}
		n.runMu.Lock()
		close(n.shutdownCh)
		n.runMu.Unlock()
		n.bgCancel()
		n.bg.Wait()
		n.runners.Wait()
		if n.beforeRaftShutdown != nil {
			n.beforeRaftShutdown()
		}
		n.shutdownErr = n.raft.Shutdown().Error()
		n.metrics.unregister()
		n.closeResources()
		if n.shutdownErr != nil {
			n.shutdownErr = fmt.Errorf("raft shutdown: %w", n.shutdownErr)
		}
	})
	return n.shutdownErr
}
