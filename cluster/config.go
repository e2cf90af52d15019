// Package cluster is Herald's Raft plumbing: it bootstraps a cluster exactly
// once, joins, leaves and removes members, forwards writes to the leader,
// starts and stops the engine's leader-only work as leadership moves, and
// wraps the engine's state machine as a raft.FSM. See DESIGN.md.
package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/engine"
)

// Defaults for Config fields left zero. The Raft timeouts are raft's own
// defaults, tuned for a LAN; DevConfig shortens them for tests and `herald
// dev`.
const (
	DefaultHeartbeatTimeout   = time.Second
	DefaultElectionTimeout    = time.Second
	DefaultLeaderLeaseTimeout = 500 * time.Millisecond
	DefaultCommitTimeout      = 50 * time.Millisecond
	DefaultSnapshotThreshold  = 8192
	DefaultSnapshotInterval   = 2 * time.Minute
	DefaultTrailingLogs       = 10240
	DefaultSnapshotRetain     = 2
	DefaultApplyTimeout       = 10 * time.Second
	DefaultJoinTimeout        = time.Minute
	DefaultDialTimeout        = 5 * time.Second
	DefaultRaftLogLevel       = "warn"
	// DefaultBootstrapWaitHeartbeats: see Config.BootstrapWait. A leader
	// heartbeats an unreachable member at least every half heartbeat
	// timeout (raft's capped backoff), so five leave room for a busy host.
	DefaultBootstrapWaitHeartbeats = 5
	// DefaultReconcileInterval is how often a restarted node checks that the
	// replicated member record still carries its current addresses.
	DefaultReconcileInterval = 2 * time.Second
	// DefaultReportInterval is how often the leader asks each member for
	// its report: a member that cannot write its log is known within it.
	DefaultReportInterval = 5 * time.Second
	// DefaultWriteRecovery is how long a node's writes must go on without
	// a failure, after one succeeded, before it counts as writing again. On
	// a full disk some writes still fit (bbolt reuses the pages it freed)
	// between failures: a node whose state changed with each of them would
	// have its alert raised and resolved over and over.
	DefaultWriteRecovery = 30 * time.Second
)

// Config configures a Node. Only NodeID, DataDir and RaftAddr (or
// RaftListener) are required.
type Config struct {
	// NodeID is this node's stable identity in Raft; it must not change
	// across restarts of the same data directory.
	NodeID string
	// DataDir holds raft.db (log and stable store) and snapshots/.
	DataDir string
	// RaftAddr is the TCP address the Raft transport binds and advertises,
	// e.g. 127.0.0.1:7101. It must be routable from the other members (not
	// 0.0.0.0). When RaftListener is set, RaftAddr defaults to its address.
	RaftAddr string
	// RaftListener, when set, is used instead of binding RaftAddr. Tests use
	// it to avoid racing for free ports; the node closes it on Shutdown.
	RaftListener net.Listener
	// HTTPAddr is this node's HTTP API address (host:port, or a URL with a
	// scheme), replicated in its member record for forwarding and clients.
	HTTPAddr string

	// Bootstrap forms a new single-voter cluster if this node has no Raft
	// state yet. A node with existing state never bootstraps again.
	Bootstrap bool
	// Join is the HTTP address of any member to join through. Retried with
	// backoff for JoinTimeout. On a node that already has state it is
	// harmless: Start does not wait on it, and it is only used in the
	// background to refresh this node's member record if its addresses
	// changed (or to re-add it if it was removed).
	Join string
	// NonVoter joins this node as a non-voter (a read replica): it
	// replicates the log and serves reads, forwards writes, and never
	// votes or leads until promoted (herald cluster promote). Refused
	// with Bootstrap: the first member must vote.
	NonVoter bool

	// Logger receives the node's logs and, bridged, raft's. Default: slog.Default().
	Logger *slog.Logger
	// RaftLogLevel filters raft's own chatter: "debug", "info", "warn"
	// (default) or "error".
	RaftLogLevel string

	// Raft timeouts; see hashicorp/raft Config. Zero means the Default*
	// constant above.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration

	// SnapshotThreshold is how many log entries since the last snapshot make
	// raft take a new one, checked every SnapshotInterval (randomised up to
	// twice that). TrailingLogs is how many entries a snapshot leaves behind
	// in the log for slow followers.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// SnapshotRetain is how many snapshots are kept on disk (default 2).
	SnapshotRetain int

	// ApplyTimeout bounds one Apply, Barrier or VerifyLeader when the
	// caller's context has no earlier deadline.
	ApplyTimeout time.Duration
	// JoinTimeout bounds the whole join attempt in Start.
	JoinTimeout time.Duration
	// Peers are the HTTP addresses of the other members, asked before a
	// node with an empty data dir bootstraps: if one answers as a member
	// of a cluster that lists this node, the node rejoins it instead of
	// forming a second cluster (its data dir was wiped); if that cluster
	// does not list it, Start refuses (ErrClusterExists).
	Peers []string
	// BootstrapWait is how long a node with an empty data dir listens
	// before it bootstraps: a live leader that still counts it as a member
	// contacts it within a few heartbeats, and the node then follows that
	// cluster instead of forming a new one. Zero means
	// DefaultBootstrapWaitHeartbeats heartbeat timeouts; negative, none.
	BootstrapWait time.Duration
	// DialTimeout bounds one outgoing Raft connection, and, with TLS, the
	// handshake of an inbound one.
	DialTimeout time.Duration
	// ReconcileInterval: see DefaultReconcileInterval.
	ReconcileInterval time.Duration

	// TLS, when set, secures the Raft transport: it is used both to accept
	// (server side) and to dial (client side), so for mutual TLS give it
	// Certificates, RootCAs, ClientCAs and ClientAuth, or use
	// CertStore.RaftConfig (certificates re-read when their files change).
	TLS *tls.Config
	// HTTPScheme is used for member HTTP addresses given without one (the
	// join address, records): "http" (default) or "https".
	HTTPScheme string
	// ClusterSecret, when set, is required of every node that joins
	// through this one, and proven by this node when it joins: an HMAC
	// over the request, never the secret itself (see PeerAuthHeader). At
	// least MinSecretLen bytes.
	ClusterSecret string
	// HTTPClient is used to join and to forward requests to the leader.
	// Default: a client with its own transport, closed on Shutdown.
	HTTPClient *http.Client
	// Token is the API token this node presents on its own calls to other
	// members (join, status, refreshing its member record). It is never
	// added to a request forwarded for a caller: that carries the caller's
	// own Authorization header, so a follower lends nobody its power.
	// Writes only: reads carry ReadToken.
	Token string
	// ReadToken is the token this node's reads of other members carry
	// (status, reports): one of role read, never an operator's stronger
	// one; with ClusterSecret the reads also carry the node read
	// credential (peerread.go), so it may be empty.
	ReadToken string
	// Registerer, when set, receives the node's Prometheus gauges.
	Registerer prometheus.Registerer
	// ReportInterval is how often the leader asks every member for its
	// report (memberreport.go). Default DefaultReportInterval.
	ReportInterval time.Duration
	// WriteRecovery: see DefaultWriteRecovery.
	WriteRecovery time.Duration
	// MaxClockSkew (max_clock_skew) is how far a follower lets the
	// leader's stamped time be from its own clock before it warns
	// (leaderclock.go). Default engine.MaxClockSkewDefault.
	MaxClockSkew time.Duration
	// WriteFault is a test hook: when set, it is asked before every write
	// to the Raft log ("log"), stable store ("stable") and snapshots
	// ("snapshot"), and an error it returns fails that write as a full or
	// broken disk would. Nil in production.
	WriteFault func(store string) error
}

// DevConfig returns c with short Raft timeouts, so that a new leader is
// elected within a second or two. For tests and `herald dev`, not for
// production networks.
func DevConfig(c Config) Config {
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	// As long as the heartbeat timeout: a shorter lease makes a leader on a
	// busy machine step down for a scheduling hiccup.
	c.LeaderLeaseTimeout = 200 * time.Millisecond
	c.CommitTimeout = 10 * time.Millisecond
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = 200 * time.Millisecond
	}
	if c.ReportInterval == 0 {
		c.ReportInterval = time.Second
	}
	if c.WriteRecovery == 0 {
		c.WriteRecovery = 2 * time.Second
	}
	return c
}

// ErrInvalidConfig is wrapped by every configuration error from New.
var ErrInvalidConfig = errors.New("invalid cluster config")

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	def(&c.ElectionTimeout, DefaultElectionTimeout)
	def(&c.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout)
	def(&c.CommitTimeout, DefaultCommitTimeout)
	def(&c.SnapshotInterval, DefaultSnapshotInterval)
	def(&c.ApplyTimeout, DefaultApplyTimeout)
	def(&c.JoinTimeout, DefaultJoinTimeout)
	def(&c.DialTimeout, DefaultDialTimeout)
	def(&c.ReconcileInterval, DefaultReconcileInterval)
	def(&c.ReportInterval, DefaultReportInterval)
	def(&c.WriteRecovery, DefaultWriteRecovery)
	def(&c.MaxClockSkew, engine.MaxClockSkewDefault)
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = DefaultTrailingLogs
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = DefaultSnapshotRetain
	}
	if c.BootstrapWait == 0 {
		c.BootstrapWait = DefaultBootstrapWaitHeartbeats * c.HeartbeatTimeout
	}
	if c.RaftLogLevel == "" {
		c.RaftLogLevel = DefaultRaftLogLevel
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RaftAddr == "" && c.RaftListener != nil {
		c.RaftAddr = c.RaftListener.Addr().String()
	}
}

func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case strings.TrimSpace(c.NodeID) == "":
		return bad("node id is empty")
	case c.DataDir == "":
		return bad("data dir is empty")
	case c.RaftAddr == "":
		return bad("raft address is empty")
	case c.Bootstrap && c.Join != "":
		return bad("bootstrap and join are mutually exclusive: bootstrap one node, join the others to it")
	case c.Bootstrap && c.NonVoter:
		return bad("a non-voter cannot bootstrap: the first member must be a voter (bootstrap a voter, then join this node with non_voter)")
	}
	if err := checkRaftAddr(c.RaftAddr, c.RaftListener != nil); err != nil {
		return bad("raft address %v", err)
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return bad("leader lease timeout %s exceeds heartbeat timeout %s", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if c.ElectionTimeout < c.HeartbeatTimeout {
		return bad("election timeout %s is below heartbeat timeout %s", c.ElectionTimeout, c.HeartbeatTimeout)
	}
	if t := c.TLS; t != nil && len(t.Certificates) == 0 && t.GetCertificate == nil && t.GetConfigForClient == nil {
		// tls.NewListener accepts such a config; every handshake would fail.
		return bad("tls: no certificate: the raft transport accepts connections with this config, give it Certificates")
	}
	if c.ClusterSecret != "" && len(c.ClusterSecret) < MinSecretLen {
		return bad("cluster secret is %d bytes, want at least %d (e.g. openssl rand -hex 32)", len(c.ClusterSecret), MinSecretLen)
	}
	switch c.HTTPScheme {
	case "", "http", "https":
	default:
		return bad("http scheme %q: want http or https", c.HTTPScheme)
	}
	if _, err := parseLevel(c.RaftLogLevel); err != nil {
		return bad("%v", err)
	}
	return nil
}

// checkRaftAddr refuses an address the other members could not dial: not
// host:port, a wildcard or empty host, or port 0 (unless anyPort: a given
// listener's own address).
func checkRaftAddr(addr string, anyPort bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("%q: want host:port", addr)
	}
	if port == "0" && !anyPort {
		return fmt.Errorf("%q: a fixed port is needed, it is advertised to the other members", addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("%q: give an address the other members can reach, not a wildcard", addr)
	}
	return nil
}

// checkHTTPAddr refuses a member HTTP address the others could not dial:
// host:port or http(s)://host:port (nothing after it), with a host that is
// not a wildcard (dialled, a wildcard reaches the dialler's own machine).
func checkHTTPAddr(addr string) error {
	u, err := url.Parse(baseURLScheme(addr, "http"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		(u.Path != "" && u.Path != "/") {
		return fmt.Errorf("%q: want host:port or http(s)://host:port", addr)
	}
	return checkRaftAddr(u.Host, false)
}

func parseLevel(s string) (hclog.Level, error) {
	switch strings.ToLower(s) {
	case "trace", "debug":
		return hclog.Debug, nil
	case "info":
		return hclog.Info, nil
	case "warn", "warning":
		return hclog.Warn, nil
	case "error":
		return hclog.Error, nil
	}
	return hclog.NoLevel, fmt.Errorf("raft log level %q: want debug, info, warn or error", s)
}
