package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/leader"
	"github.com/heraldhq/herald/rules"
)

// nodeConfig is one node's configuration: a YAML file (--config), where
// every key is also a flag (--node-id for node_id) and a HERALD_* variable
// (HERALD_NODE_ID). Flags win over variables, variables over the file.
type nodeConfig struct {
	NodeID    string `yaml:"node_id"`
	DataDir   string `yaml:"data_dir"`
	RaftAddr  string `yaml:"raft_addr"`
	HTTPAddr  string `yaml:"http_addr"`
	Bootstrap bool   `yaml:"bootstrap"`
	Join      string `yaml:"join"`
	// NonVoter joins as a read replica (cluster.Config.NonVoter).
	NonVoter bool `yaml:"non_voter"`
	// JoinTimeout bounds --join (a duration such as "1m"); default 1m.
	JoinTimeout string `yaml:"join_timeout"`
	Rules       string `yaml:"rules"`
	Plugins     string `yaml:"plugins"`
	// PluginUser runs every plugin as this user (name or uid): an agent
	// run as root keeps its files and /proc from its plugins.
	PluginUser string `yaml:"plugin_user"`
	LogLevel   string `yaml:"log_level"`
	// LogFormat is text (default) or json (logging.go).
	LogFormat string `yaml:"log_format"`
	// DisplayTimezone is the zone of every time the node writes for a
	// person (alert texts, the dashboard); default the machine's zone.
	DisplayTimezone string `yaml:"display_timezone"`
	// RuleMemoryLimit bounds how much the node's memory may grow while one
	// rule call runs ("128MiB" by default; KiB, MiB or GiB): past it the
	// call is stopped, and a file whose top level does it is refused.
	RuleMemoryLimit string `yaml:"rule_memory_limit"`
	// RuleTimeout bounds each call of a rule function (the file's top
	// level, recipients, message for one person, a hook): a duration,
	// default 2s (rules.DefaultCallTimeout). PlanTimeout bounds a whole
	// run's plan, every call and its replication (default 1m,
	// leader.PlanTimeoutDefault); it is at least RuleTimeout. A run past
	// either fails, names the limit and sends nothing.
	RuleTimeout string `yaml:"rule_timeout"`
	PlanTimeout string `yaml:"plan_timeout"`
	// GCPercent is how far past the live heap Go's collector lets the heap
	// grow before it collects (gc.go; default 50, where Go's is 100): set
	// at start; GOGC in the environment wins.
	GCPercent string `yaml:"gc_percent"`
	// GCHeadroom is how far past the live heap the heap may always grow,
	// whatever GCPercent says (gc.go; default 128MiB, 0 none): a small
	// heap is not collected every few megabytes. GOGC wins here too.
	GCHeadroom string `yaml:"gc_headroom"`
	// PprofAddr, when set, serves Go's profiles (/debug/pprof/) there, on a
	// listener of its own: for `herald bench --profile` and diagnosis.
	// It must be a loopback address (profiles show the process's insides,
	// without auth) unless PprofAllowRemote says otherwise.
	PprofAddr string `yaml:"pprof_addr"`
	// PprofAllowRemote lets pprof_addr be an address other machines can
	// reach (the node then warns at start); refused at start otherwise.
	PprofAllowRemote bool `yaml:"pprof_allow_remote"`
	// RaftTimeouts tunes Raft's failure detection: "lan" (default: a new
	// leader within about a second of a crash), "wan" (for members far
	// apart), or "heartbeat=D,election=D,lease=D" (any of them, the rest
	// from lan).
	RaftTimeouts string `yaml:"raft_timeouts"`
	// PlanAhead: a scheduled slot is planned and replicated this long
	// before it (default 1m, at most 10m, 0s at the slot), so that its
	// first message leaves at the slot.
	PlanAhead string `yaml:"plan_ahead"`
	// AuditRetention is how long the audit trail keeps a record (a
	// duration; default 90 days, engine.AuditRetentionDefault).
	AuditRetention string `yaml:"audit_retention"`
	// MaxClockSkew is how far a member's clock may be from the majority's
	// (a duration; default 10s, engine.MaxClockSkewDefault): a leader
	// further off fires, prunes and expires nothing and hands leadership
	// over; a follower that sees the leader's stamps further off warns.
	MaxClockSkew string `yaml:"max_clock_skew"`
	// Retention is how long finished deliveries are kept (a duration;
	// default 7 days, engine.RetentionDefault). LedgerRetention is how
	// long a pruned run's key is still refused, so its slot cannot fire
	// again (default 90 days, engine.LedgerRetentionDefault): it must be
	// longer than Retention and than every rule's catchup, or a slot
	// forgotten by the ledger could be caught up and sent twice.
	Retention       string `yaml:"retention"`
	LedgerRetention string `yaml:"ledger_retention"`
	// Channels are the channel instances by name: {plugin: NAME, ...the
	// plugin's own keys}. Values may reference ${ENV} variables (secrets).
	Channels map[string]map[string]any `yaml:"channels"`
	// TLSCert, TLSKey and TLSCA are PEM files (all three or none): the API
	// serves HTTPS only, Raft is mutual TLS, nodes talk HTTPS to each
	// other. Re-read when they change.
	TLSCert string `yaml:"tls_cert"`
	TLSKey  string `yaml:"tls_key"`
	TLSCA   string `yaml:"tls_ca"`
	// ClusterSecret is a ${ENV} reference to the secret every member
	// holds; a node joins, and is accepted, only by proving it.
	ClusterSecret string `yaml:"cluster_secret"`
	// Peers are the other members' HTTP addresses, comma separated: asked
	// before a node with an empty data dir bootstraps.
	Peers string `yaml:"peers"`
	// Directory, when set, loads people from WeCom's contacts (see
	// directory.go).
	Directory *directoryConfig `yaml:"directory"`
	// Tokens are the API tokens: {name, role, token: ${ENV}}. File only
	// (a list, like channels). None: writes from loopback only.
	Tokens []tokenConfig `yaml:"tokens"`
	// PluginSHA256 allows external plugins: {NAME: hex sha256 of its
	// executable}. An external plugin not listed is never run.
	PluginSHA256 map[string]string `yaml:"plugin_sha256"`

	// apiTokens are Tokens resolved by validate.
	apiTokens []api.Token

	// logLevel is the level every handler of the agent's logger reads; a
	// reload sets it from LogLevel. nil: not reloadable (herald dev).
	logLevel *slog.LevelVar

	devTimeouts  bool   // `herald dev` and tests: short Raft timeouts
	raftLogLevel string // "" means log_level's
	// writeFault is the tests' way to fail this node's Raft writes
	// (cluster.Config.WriteFault); nil otherwise.
	writeFault func(store string) error
	// clusterSecret is ClusterSecret resolved; never logged or shown.
	clusterSecret string
	// secretFromEnv: the final ClusterSecret came from HERALD_CLUSTER_SECRET
	// itself, where the secret may be given literally.
	secretFromEnv bool
}

// configKeys lists every scalar key: YAML name, flag, usage, field.
func (c *nodeConfig) keys() []configKey {
	return []configKey{
		{"node_id", "node-id", "this node's stable id in the cluster", &c.NodeID, nil},
		{"data_dir", "data-dir", "where Raft's log, snapshots and the mock outbox live", &c.DataDir, nil},
		{"raft_addr", "raft-addr", "Raft transport address (host:port reachable by the other nodes)", &c.RaftAddr, nil},
		{"http_addr", "http-addr", "HTTP API address", &c.HTTPAddr, nil},
		{"bootstrap", "bootstrap", "form a new cluster if this node has no state yet (never again after)", nil, &c.Bootstrap},
		{"join", "join", "HTTP address of any member to join through", &c.Join, nil},
		{"non_voter", "non-voter", "join as a non-voter (a read replica: replicates, serves reads, forwards writes, never votes or leads) until herald cluster promote", nil, &c.NonVoter},
		{"join_timeout", "join-timeout", "give up joining after this long (e.g. 1m)", &c.JoinTimeout, nil},
		{"rules", "rules", "directory of Lua rule files (watched)", &c.Rules, nil},
		{"plugins", "plugins", "directory of herald-channel-* plugin executables", &c.Plugins, nil},
		{"plugin_user", "plugin-user", "run every plugin as this user (name or uid; the agent must run as root): its files and /proc stay out of the plugins' reach", &c.PluginUser, nil},
		{"log_level", "log-level", "debug, info, warn or error (Raft's and the plugins' lines too)", &c.LogLevel, nil},
		{"log_format", "log-format", "text (default) or json: one JSON object per line, Raft's and the plugins' lines included", &c.LogFormat, nil},
		{"tls_cert", "tls-cert", "PEM certificate of this node (with tls_key and tls_ca: HTTPS API, mutual-TLS Raft)", &c.TLSCert, nil},
		{"tls_key", "tls-key", "PEM private key of tls_cert", &c.TLSKey, nil},
		{"tls_ca", "tls-ca", "PEM CA certificate that signs every member's certificate", &c.TLSCA, nil},
		{"cluster_secret", "cluster-secret", "${ENV} reference to the secret every member must hold to join", &c.ClusterSecret, nil},
		{"peers", "peers", "the other members' HTTP addresses (comma separated), asked before bootstrapping an empty data dir", &c.Peers, nil},
		{"display_timezone", "display-timezone", "zone of the times shown to people: alert texts, dashboard (IANA name; default the machine's zone)", &c.DisplayTimezone, nil},
		{"plan_ahead", "plan-ahead", "plan and replicate a scheduled slot this long before it (default 1m, at most 10m; 0s: at the slot)", &c.PlanAhead, nil},
		{"audit_retention", "audit-retention", "keep audit records this long (default 2160h: 90 days)", &c.AuditRetention, nil},
		{"max_clock_skew", "max-clock-skew", "how far a member's clock may be from the majority's before a leader holds firing, pruning and expiry and hands leadership over (default 10s, 1s to 1h)", &c.MaxClockSkew, nil},
		{"retention", "retention", "keep finished deliveries this long (default 168h: 7 days; at least 1h)", &c.Retention, nil},
		{"ledger_retention", "ledger-retention", "refuse a pruned run's slot this long (default 2160h: 90 days; longer than retention and every rule's catchup)", &c.LedgerRetention, nil},
		{"raft_timeouts", "raft-timeouts", "Raft failure detection: lan (default), wan, or heartbeat=D,election=D,lease=D", &c.RaftTimeouts, nil},
		{"rule_memory_limit", "rule-memory-limit", "stop a rule call that grows the node's memory by more than this (default 128MiB plus 256 bytes per person in the directory; KiB, MiB or GiB, at least 16MiB)", &c.RuleMemoryLimit, nil},
		{"rule_timeout", "rule-timeout", "stop a rule call (top level, recipients, one person's message, a hook) that runs longer than this (default 2s, 100ms to 1m)", &c.RuleTimeout, nil},
		{"plan_timeout", "plan-timeout", "fail a run whose whole plan (every rule call and replicating its deliveries) takes longer than this (default 1m, 1s to 1h, at least rule_timeout)", &c.PlanTimeout, nil},
		{"gc_percent", "gc-percent", "let the heap grow this many percent past what is live before Go collects (default 50, 10 to 1000; read at start; GOGC in the environment wins)", &c.GCPercent, nil},
		{"gc_headroom", "gc-headroom", "let the heap always grow at least this far past what is live, whatever gc_percent says (default 128MiB; KiB, MiB or GiB, at least 1MiB, or 0 for none; read at start; GOGC in the environment wins)", &c.GCHeadroom, nil},
		{"pprof_addr", "pprof-addr", "serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060); off when empty; loopback only unless pprof_allow_remote", &c.PprofAddr, nil},
		{"pprof_allow_remote", "pprof-allow-remote", "let pprof_addr be an address other machines can reach (profiles have no auth)", nil, &c.PprofAllowRemote},
	}
}

type configKey struct {
	yaml, flag, usage string
	str               *string
	boolean           *bool
}

func (k configKey) env() string {
	return "HERALD_" + strings.ToUpper(k.yaml)
}

// bindFlags declares one flag per key, plus --config.
func (c *nodeConfig) bindFlags(cmd *cobra.Command) {
	cmd.Flags().String("config", "", "YAML config file (keys as the flags, with _ for -; plus channels)")
	for _, k := range c.keys() {
		usage := k.usage + " (env " + k.env() + ")"
		if k.boolean != nil {
			cmd.Flags().Bool(k.flag, *k.boolean, usage)
		} else {
			cmd.Flags().String(k.flag, *k.str, usage)
		}
	}
}

// readFile fills c from the YAML file at path.
func (c *nodeConfig) readFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return fmt.Errorf("config %s: %s", path, strings.Join(te.Errors, "; "))
		}
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// channelNames lists the channel instances a node with this config has:
// its channels, or the default mock when it names none.
func (c *nodeConfig) channelNames() []string {
	if len(c.Channels) == 0 {
		return []string{"mock"}
	}
	names := make([]string, 0, len(c.Channels))
	for name := range c.Channels {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// configForCheck reads a node's config file for what `herald rules check
// --config` checks against: its channel names and its rule limits.
func configForCheck(path string) (*nodeConfig, error) {
	var c nodeConfig
	if err := c.readFile(path); err != nil {
		return nil, err
	}
	return &c, nil
}

// load fills c from the file, the environment and the flags, in that order.
func (c *nodeConfig) load(cmd *cobra.Command) error {
	if path, _ := cmd.Flags().GetString("config"); path != "" {
		if err := c.readFile(path); err != nil {
			return err
		}
	}
	for _, k := range c.keys() {
		if v, ok := os.LookupEnv(k.env()); ok {
			if err := k.set(v); err != nil {
				return fmt.Errorf("%s: %w", k.env(), err)
			}
			c.secretFromEnv = c.secretFromEnv || k.yaml == "cluster_secret"
		}
		if f := cmd.Flags().Lookup(k.flag); f != nil && f.Changed {
			if err := k.set(f.Value.String()); err != nil {
				return fmt.Errorf("--%s: %w", k.flag, err)
			}
			c.secretFromEnv = c.secretFromEnv && k.yaml != "cluster_secret"
		}
	}
	return c.validate()
}

func (k configKey) set(v string) error {
	if k.boolean != nil {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		*k.boolean = b
		return nil
	}
	*k.str = v
	return nil
}

func (c *nodeConfig) validate() error {
	var missing []string
	for _, k := range c.keys() {
		if k.str != nil && *k.str == "" && (k.yaml == "node_id" || k.yaml == "data_dir" || k.yaml == "raft_addr" || k.yaml == "http_addr") {
			missing = append(missing, "--"+k.flag)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("config: %s required", strings.Join(missing, ", "))
	}
	if c.Bootstrap && c.Join != "" {
		return errors.New("config: give --bootstrap or --join, not both")
	}
	if c.Bootstrap && c.NonVoter {
		return errors.New("config: a non-voter cannot bootstrap (non_voter with bootstrap): the first member must be a voter; bootstrap a voter and join this node to it")
	}
	for name, ch := range c.Channels {
		if p, _ := ch["plugin"].(string); p == "" {
			return fmt.Errorf("config: channel %q: plugin is required (e.g. plugin: mock)", name)
		}
	}
	if _, err := callbackSettings(c.Channels); err != nil {
		return err
	}
	if c.JoinTimeout != "" {
		if d, err := time.ParseDuration(c.JoinTimeout); err != nil || d <= 0 {
			return fmt.Errorf("config: join_timeout %q: want a positive duration such as 1m", c.JoinTimeout)
		}
	}
	if _, err := engine.LoadZone(c.DisplayTimezone); err != nil {
		return fmt.Errorf("config: display_timezone: %w", err)
	}
	if _, err := parsePlanAhead(c.PlanAhead); err != nil {
		return fmt.Errorf("config: plan_ahead %q: %w", c.PlanAhead, err)
	}
	if _, err := parseAuditRetention(c.AuditRetention); err != nil {
		return fmt.Errorf("config: audit_retention %q: %w", c.AuditRetention, err)
	}
	if _, err := parseMaxClockSkew(c.MaxClockSkew); err != nil {
		return fmt.Errorf("config: max_clock_skew %q: %w", c.MaxClockSkew, err)
	}
	if _, err := parseRuleMemoryLimit(c.RuleMemoryLimit); err != nil {
		return fmt.Errorf("config: rule_memory_limit %q: %w", c.RuleMemoryLimit, err)
	}
	if _, _, err := c.timeouts(); err != nil {
		return err
	}
	if _, err := parseGCPercent(c.GCPercent); err != nil {
		return fmt.Errorf("config: gc_percent %q: %w", c.GCPercent, err)
	}
	if _, err := parseGCHeadroom(c.GCHeadroom); err != nil {
		return fmt.Errorf("config: gc_headroom %q: %w", c.GCHeadroom, err)
	}
	if _, _, err := c.retentions(); err != nil {
		return err
	}
	if _, err := parseRaftTimeouts(c.RaftTimeouts); err != nil {
		return fmt.Errorf("config: raft_timeouts %q: %w", c.RaftTimeouts, err)
	}
	if c.PprofAddr != "" && !c.PprofAllowRemote && !api.IsLoopbackAddr(c.PprofAddr) {
		// Profiles have no auth and show memory, goroutines and the
		// command line: off loopback only when asked for in so many words.
		return fmt.Errorf("config: pprof_addr %q is not a loopback address (127.0.0.1, ::1, localhost): "+
			"pprof has no auth; use e.g. 127.0.0.1:6060, or set pprof_allow_remote: true (--pprof-allow-remote) to serve it to other machines", c.PprofAddr)
	}
	if c.Directory != nil {
		if _, err := c.Directory.settings(c.Channels); err != nil {
			return err
		}
	}
	tokens, err := resolveTokens(c.Tokens, nil)
	if err != nil {
		return err
	}
	c.apiTokens = tokens
	if c.PluginSHA256, err = checkPluginSHA256(c.PluginSHA256); err != nil {
		return err
	}
	switch c.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("config: log_level %q: want debug, info, warn or error", c.LogLevel)
	}
	if err := checkLogFormat(c.LogFormat); err != nil {
		return err
	}
	if set := countSet(c.TLSCert, c.TLSKey, c.TLSCA); set != 0 && set != 3 {
		return errors.New("config: tls_cert, tls_key and tls_ca go together: give all three (herald tls init writes them)")
	}
	if c.ClusterSecret != "" {
		s, err := resolveSecret("cluster_secret", c.ClusterSecret, c.secretFromEnv)
		if err != nil {
			return err
		}
		c.clusterSecret = s
	}
	return nil
}

// raftTimeouts are the Raft timeouts a node runs with.
type raftTimeouts struct {
	Heartbeat, Election, Lease time.Duration
}

// The raft_timeouts presets. lan: a follower that hears nothing for 500 ms
// (raft randomises up to twice that) stands for election, so a crashed
// leader is replaced in about a second; the lease equals the heartbeat
// timeout so that a leader on a busy machine does not step down for a
// scheduling hiccup. wan: raft's own defaults doubled, for members tens of
// milliseconds apart.
var (
	raftTimeoutsLAN = raftTimeouts{Heartbeat: 500 * time.Millisecond, Election: 500 * time.Millisecond, Lease: 500 * time.Millisecond}
	raftTimeoutsWAN = raftTimeouts{Heartbeat: 2 * time.Second, Election: 2 * time.Second, Lease: time.Second}
)

// parseRaftTimeouts reads raft_timeouts: "" or "lan", "wan", or
// comma-separated heartbeat=, election=, lease= durations over lan.
func parseRaftTimeouts(s string) (raftTimeouts, error) {
	switch strings.TrimSpace(s) {
	case "", "lan":
		return raftTimeoutsLAN, nil
	case "wan":
		return raftTimeoutsWAN, nil
	}
	t := raftTimeoutsLAN
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if !ok || err != nil || d <= 0 {
			return t, fmt.Errorf("want lan, wan or heartbeat=D,election=D,lease=D with positive durations (e.g. heartbeat=1s,election=1s,lease=500ms); %q is not one", part)
		}
		switch strings.TrimSpace(k) {
		case "heartbeat":
			t.Heartbeat = d
		case "election":
			t.Election = d
		case "lease":
			t.Lease = d
		default:
			return t, fmt.Errorf("unknown timeout %q: want heartbeat, election or lease", k)
		}
	}
	if t.Lease > t.Heartbeat {
		return t, fmt.Errorf("lease %s exceeds heartbeat %s", t.Lease, t.Heartbeat)
	}
	if t.Election < t.Heartbeat {
		return t, fmt.Errorf("election %s is below heartbeat %s", t.Election, t.Heartbeat)
	}
	return t, nil
}

func countSet(vals ...string) int {
	n := 0
	for _, v := range vals {
		if v != "" {
			n++
		}
	}
	return n
}

// secretRef is a whole-value ${NAME} reference.
var secretRef = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// resolveSecret turns a ${NAME} reference into the variable's value. A
// literal secret is taken only from the key's own HERALD_* variable
// (literalOK): written in a config file or on a command line, it is
// readable by whoever reads the file or lists processes. Errors name the
// key and the variable, never a value.
func resolveSecret(key, raw string, literalOK bool) (string, error) {
	m := secretRef.FindStringSubmatch(raw)
	if m == nil {
		if literalOK {
			return raw, nil
		}
		return "", fmt.Errorf("config: %s must be a ${ENV} reference such as ${HERALD_SECRET}, not the secret itself", key)
	}
	v, ok := os.LookupEnv(m[1])
	if !ok || v == "" {
		return "", fmt.Errorf("config: %s refers to ${%s}, which is not set", key, m[1])
	}
	return v, nil
}

// peerList splits the peers key.
func (c *nodeConfig) peerList() []string {
	var out []string
	for _, p := range strings.Split(c.Peers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseAuditRetention reads audit_retention: "" is the default, else a
// duration of at least a day (a shorter trail would be gone before anyone
// looked).
func parseAuditRetention(s string) (time.Duration, error) {
	if s == "" {
		return engine.AuditRetentionDefault, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 24*time.Hour {
		return 0, errors.New("want a duration of at least 24h, such as 2160h (90 days)")
	}
	return d, nil
}

// parseMaxClockSkew reads max_clock_skew: "" is the default, else a
// duration from 1s (below it, NTP's own corrections and the offsets'
// measurement would trip it) to 1h (beyond, a skewed leader could fire
// an hour early).
func parseMaxClockSkew(s string) (time.Duration, error) {
	if s == "" {
		return engine.MaxClockSkewDefault, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second || d > time.Hour {
		return 0, errors.New("want a duration from 1s to 1h, such as 10s")
	}
	return d, nil
}

// retentions reads retention and ledger_retention ("" is each one's
// default). The ledger must outlive the deliveries: a run key it forgot
// while the run's deliveries were still kept would let the slot fire again.
// Every rule's catchup is checked against the ledger where rules load
// (rules.Config.MaxCatchup).
func (c *nodeConfig) retentions() (retention, ledger time.Duration, err error) {
	retention, ledger = engine.RetentionDefault, engine.LedgerRetentionDefault
	if c.Retention != "" {
		if retention, err = time.ParseDuration(c.Retention); err != nil || retention < time.Hour {
			return 0, 0, fmt.Errorf("config: retention %q: want a duration of at least 1h, such as 168h (7 days)", c.Retention)
		}
	}
	if c.LedgerRetention != "" {
		if ledger, err = time.ParseDuration(c.LedgerRetention); err != nil || ledger <= 0 {
			return 0, 0, fmt.Errorf("config: ledger_retention %q: want a duration such as 2160h (90 days)", c.LedgerRetention)
		}
	}
	if ledger <= retention {
		return 0, 0, fmt.Errorf("config: ledger_retention %s must be longer than retention %s: a pruned run's slot must stay refused after its deliveries are gone, or it could fire again",
			ledger, retention)
	}
	return retention, ledger, nil
}

// planAheadDefault is plan_ahead when it is not set.
const planAheadDefault = time.Minute

// parsePlanAhead reads plan_ahead: "" is the default, else a duration from
// 0s (plan at the slot) to leader.MaxPlanAhead.
func parsePlanAhead(s string) (time.Duration, error) {
	if s == "" {
		return planAheadDefault, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > leader.MaxPlanAhead {
		return 0, fmt.Errorf("want a duration from 0s to %s, such as 1m", leader.MaxPlanAhead)
	}
	return d, nil
}

// The ranges of rule_timeout and plan_timeout. Below 100ms an ordinary
// rule over a few thousand people is stopped; past a minute one call holds
// the rule's sandbox, and past an hour a 9:00 run would plan after 10:00.
const (
	minRuleTimeout = 100 * time.Millisecond
	maxRuleTimeout = time.Minute
	minPlanTimeout = time.Second
	maxPlanTimeout = time.Hour
)

// timeouts reads rule_timeout and plan_timeout ("" is each one's
// default): the plan's limit holds every call of it, so it is no shorter
// than one call's.
func (c *nodeConfig) timeouts() (rule, plan time.Duration, err error) {
	rule, err = parseRuleTimeout(c.RuleTimeout)
	if err != nil {
		return 0, 0, fmt.Errorf("config: rule_timeout %q: %w", c.RuleTimeout, err)
	}
	plan, err = parseDurationIn(c.PlanTimeout, leader.PlanTimeoutDefault, minPlanTimeout, maxPlanTimeout)
	if err != nil {
		return 0, 0, fmt.Errorf("config: plan_timeout %q: %w", c.PlanTimeout, err)
	}
	if plan < rule {
		return 0, 0, fmt.Errorf("config: plan_timeout %s is shorter than rule_timeout %s: a run's plan holds every rule call of it", plan, rule)
	}
	return rule, plan, nil
}

// parseRuleTimeout reads rule_timeout: "" is rules' DefaultCallTimeout.
func parseRuleTimeout(s string) (time.Duration, error) {
	return parseDurationIn(s, rules.DefaultCallTimeout, minRuleTimeout, maxRuleTimeout)
}

// parseDurationIn reads a duration from lo to hi; "" is def.
func parseDurationIn(s string, def, lo, hi time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		return 0, fmt.Errorf("want a duration from %s to %s, such as %s", lo, hi, def)
	}
	return d, nil
}

// minRuleMemoryLimit is the smallest rule_memory_limit: below it, ordinary
// rules over a few thousand people would be stopped.
const minRuleMemoryLimit = 16 << 20

// parseRuleMemoryLimit reads rule_memory_limit: "" is 0, which rules
// takes for its default (DefaultMemoryLimit plus PersonMemoryAllowance a
// person), else a whole number of KiB, MiB or GiB of at least
// minRuleMemoryLimit.
func parseRuleMemoryLimit(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	return parseSize(s, minRuleMemoryLimit)
}

// parseSize reads a whole number of KiB, MiB or GiB of at least least
// bytes.
func parseSize(s string, least uint64) (uint64, error) {
	bad := fmt.Errorf("want a size of at least %s in KiB, MiB or GiB, such as 128MiB or 1GiB", rules.FormatSize(least))
	num, unit := strings.TrimSpace(s), uint64(0)
	for suffix, u := range map[string]uint64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if n, ok := strings.CutSuffix(num, suffix); ok {
			num, unit = strings.TrimSpace(n), u
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || unit == 0 || n > (1<<62)/unit || n*unit < least {
		return 0, bad
	}
	return n * unit, nil
}
