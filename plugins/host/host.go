// Package host runs Herald's channel plugins: it discovers them, launches
// each configured channel instance as a go-plugin subprocess, verifies its
// protocol version, configures it, watches its health, restarts it when it
// crashes, and enforces its rate limits. *Host is the engine's Sender.
package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/heraldhq/herald/engine/heraldtype"
)

// Defaults of Config.
const (
	DefaultHighReserve    = 0.2
	DefaultHealthInterval = 10 * time.Second
	DefaultRestartMin     = 200 * time.Millisecond
	DefaultRestartMax     = 30 * time.Second
	DefaultRecipientCache = 100_000
	// NotReadyWait is what Admit answers for a channel whose plugin has
	// not started yet: its limits are not known, and Send would fail.
	NotReadyWait = time.Second
)

var (
	// ErrUnknownChannel is returned by Send for a channel that is not in
	// the configuration.
	ErrUnknownChannel = errors.New("unknown channel")
	// ErrUnknownPlugin is returned by New for a channel whose plugin is
	// neither built in nor found in the plugins directory.
	ErrUnknownPlugin = errors.New("unknown plugin")
	// ErrUnavailable is returned by Send when the channel's plugin is not
	// running: its last start failed, or it died and did not come back.
	ErrUnavailable = errors.New("channel unavailable")
	// ErrSendFailed is returned by Send when the plugin failed the batch
	// as a whole (its Send returned an error).
	ErrSendFailed = errors.New("channel failed the batch")
	// ErrBadResponse is returned by Send when a plugin's answer does not
	// match the batch (a result for an unknown id, two for one id, one
	// missing, or an unknown status). The batch is failed as a whole.
	ErrBadResponse = errors.New("plugin answered the batch wrongly")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("plugin host closed")
	// ErrConfig is returned by New for an invalid Config.
	ErrConfig = errors.New("invalid plugin host config")
)

// MaxResultText bounds the bytes of a result's Code and Error kept from a
// plugin's answer: they are replicated with every result, and a plugin
// that quotes a whole error page would otherwise put it in the log once
// per message of the batch. The rest is cut, and the text says so.
const MaxResultText = 2 << 10

// Config configures a Host.
type Config struct {
	// PluginsDir holds external plugins: executables named
	// herald-channel-NAME provide plugin NAME. Empty means none.
	PluginsDir string
	// Channels are the channel instances of the node configuration, by
	// instance name.
	Channels map[string]ChannelConfig
	// BuiltinCmdFunc returns the command that serves a built-in channel.
	// Default: this executable with args `plugin serve NAME`.
	BuiltinCmdFunc func(name string) *exec.Cmd
	// Logger receives the host's and the plugins' logs. Default: discard.
	Logger *slog.Logger
	// HighReserve is the share (0 ≤ x < 1) of every rate-limit bucket that
	// only PriorityHigh may use. Default DefaultHighReserve; set
	// NoHighReserve for none.
	HighReserve float64
	// NoHighReserve turns the reserve off (HighReserve's zero value means
	// the default).
	NoHighReserve bool
	// HealthInterval is the period of the Health call. Default 10s.
	HealthInterval time.Duration
	// StartTimeout bounds a plugin's start, each Configure, Info and
	// Health call, and a graceful stop (then the process is killed).
	// Default DefaultStartTimeout.
	StartTimeout time.Duration
	// RestartMin and RestartMax bound the backoff between restarts of a
	// failing plugin. The first restart after a plugin ran well is
	// immediate. Defaults 200ms and 30s.
	RestartMin, RestartMax time.Duration
	// RecipientCache caps the recipients whose buckets are kept per
	// channel (about 130 bytes each with two limits). Only recipients whose
	// buckets are full again are forgotten; while the cache is full of
	// others, a new recipient waits. Default 100,000.
	RecipientCache int
	// PluginSHA256 lists, by plugin name, the hex SHA-256 of each external
	// plugin allowed to run (config plugin_sha256). An external plugin not
	// listed, or whose file has another hash, is never run: its channels
	// are unhealthy with the reason. Built-in plugins need no entry.
	PluginSHA256 map[string]string
	// LookupEnvFunc resolves ${NAME} in channel configs. Default
	// os.LookupEnv.
	LookupEnvFunc func(name string) (string, bool)
	// PluginUser, when set (a user name or uid; config plugin_user), is
	// the user every plugin runs as, with that user's primary group and
	// no supplementary groups: an agent run as root then keeps its files
	// (data dir, TLS key) and its /proc from its plugins. Needs root.
	PluginUser string
	// Secrets are the node's other secrets (API tokens, the cluster
	// secret): redacted, with every channel's secrets, from every
	// plugin's texts (results, errors, logs), whichever plugin wrote them.
	Secrets []string
}

// ChannelConfig is one channel instance of the node configuration,
// `channels: {NAME: {plugin: mock, outbox: PATH}}`: Plugin is the plugin's
// name and Config every other key, handed to the plugin's Configure as JSON
// after ${ENV} references in string values are resolved, with "channel" set
// to the instance name.
type ChannelConfig struct {
	Plugin string
	Config map[string]any
}

// DefaultBuiltinCmd runs this executable as `herald plugin serve NAME`.
func DefaultBuiltinCmd(name string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exec.Command(exe, "plugin", "serve", name)
}

// Host runs the channel plugins of one node. It is safe for concurrent use.
type Host struct {
	cfg       Config
	log       *slog.Logger
	instances map[string]*instance

	ctx    context.Context // ends at Close; bounds every plugin
	cancel context.CancelFunc
	// cred is Config.PluginUser's, nil when plugins run as the agent.
	cred *credential
	wg   sync.WaitGroup

	mu      sync.Mutex
	started bool
	closed  bool

	// imu guards instances, which a Reload changes; reloadMu makes
	// reloads one at a time.
	imu      sync.RWMutex
	reloadMu sync.Mutex
}

// channel returns the instance serving channel, or nil.
func (h *Host) channel(name string) *instance {
	h.imu.RLock()
	defer h.imu.RUnlock()
	return h.instances[name]
}

// New checks cfg, finds every channel's plugin and resolves its
// configuration. It starts nothing: see Start.
func New(cfg Config) (*Host, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	sources, err := sources(cfg)
	if err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg, log: cfg.Logger, instances: make(map[string]*instance)}
	if cfg.PluginUser != "" {
		if h.cred, err = pluginCredential(cfg.PluginUser); err != nil {
			return nil, err
		}
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	// One redactor for every plugin, of every secret the node knows
	// (issue 19: only the channel's own were hidden, so a plugin could
	// put another channel's secret, or a token, into a result's error,
	// which every read token sees in GET /v1/deliveries).
	all := slices.Clone(cfg.Secrets)
	fresh := map[string]*instance{}
	for name, cc := range cfg.Channels {
		in, secrets, err := h.newChannel(name, cc, sources)
		if err != nil {
			return nil, err
		}
		all = append(all, secrets...)
		fresh[name] = in
	}
	redact := newRedactor(all)
	for name, in := range fresh {
		in.setRedact(redact)
		h.instances[name] = in
	}
	return h, nil
}

// newChannel checks one channel instance's config and builds its
// supervisor (not started); it returns the channel's secrets too.
func (h *Host) newChannel(name string, cc ChannelConfig, sources map[string]source) (*instance, []string, error) {
	if name == "" {
		return nil, nil, fmt.Errorf("%w: a channel has an empty name", ErrConfig)
	}
	if cc.Plugin == "" {
		return nil, nil, fmt.Errorf("%w: channel %s: plugin is required", ErrConfig, name)
	}
	src, ok := sources[cc.Plugin]
	if !ok {
		return nil, nil, fmt.Errorf("%w: channel %s: plugin %q is neither built in (%v) nor herald-channel-%s in the plugins directory %q",
			ErrUnknownPlugin, name, cc.Plugin, builtinNames(), cc.Plugin, h.cfg.PluginsDir)
	}
	if _, ok := cc.Config["channel"]; ok {
		return nil, nil, fmt.Errorf("%w: channel %s: the key \"channel\" is reserved (the host sets it to the instance name)", ErrConfig, name)
	}
	resolved, secrets, err := resolveConfig(cc.Config, h.cfg.LookupEnvFunc)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: channel %s: %w", ErrConfig, name, err)
	}
	resolved["channel"] = name
	raw, err := json.Marshal(resolved)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: channel %s: config is not JSON-able: %v", ErrConfig, name, err)
	}
	// The caller sets the redactor, of every channel's secrets.
	return newInstance(h, name, src, raw, newRedactor(secrets)), secrets, nil
}

func (c *Config) setDefaults() error {
	if c.BuiltinCmdFunc == nil {
		c.BuiltinCmdFunc = DefaultBuiltinCmd
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.NoHighReserve:
		c.HighReserve = 0
	case c.HighReserve == 0:
		c.HighReserve = DefaultHighReserve
	case c.HighReserve < 0 || c.HighReserve >= 1:
		return fmt.Errorf("%w: high reserve %v is outside [0, 1)", ErrConfig, c.HighReserve)
	}
	if c.HealthInterval <= 0 {
		c.HealthInterval = DefaultHealthInterval
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.RestartMin <= 0 {
		c.RestartMin = DefaultRestartMin
	}
	if c.RestartMax <= 0 {
		c.RestartMax = DefaultRestartMax
	}
	if c.RestartMax < c.RestartMin {
		c.RestartMax = c.RestartMin
	}
	if c.RecipientCache <= 0 {
		c.RecipientCache = DefaultRecipientCache
	}
	if c.LookupEnvFunc == nil {
		c.LookupEnvFunc = os.LookupEnv
	}
	return nil
}

// Start launches every channel's plugin and returns once each has had its
// first start attempt, or when ctx ends (then with ctx's error; the plugins
// keep starting in the background). A plugin that fails to start does not
// fail Start: it shows in Status and is retried with backoff, and Send on
// its channel fails with ErrUnavailable meanwhile.
func (h *Host) Start(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrClosed
	}
	if h.started {
		h.mu.Unlock()
		return errors.New("plugin host already started")
	}
	h.started = true
	h.mu.Unlock()

	h.imu.RLock()
	ins := slices.Collect(maps.Values(h.instances))
	h.imu.RUnlock()
	first := make(chan struct{}, len(ins))
	for _, in := range ins {
		h.launch(in, func() { first <- struct{}{} })
	}
	for range ins {
		select {
		case <-first:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// launch starts in's supervisor under its own context (a reload stops
// one channel without the others).
func (h *Host) launch(in *instance, firstDone func()) {
	in.ctx, in.stop = context.WithCancel(h.ctx)
	h.wg.Go(func() { in.run(in.ctx, firstDone) })
}

// Close stops every plugin and waits for them. Sends in flight fail.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	return nil
}

// Status reports every channel instance, sorted by name.
func (h *Host) Status() []heraldtype.ChannelStatus {
	h.imu.RLock()
	ins := slices.Collect(maps.Values(h.instances))
	h.imu.RUnlock()
	out := make([]heraldtype.ChannelStatus, 0, len(ins))
	for _, in := range ins {
		out = append(out, in.status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Pid returns the process id of channel's running plugin, or 0 when it has
// none (not started, down, or an unknown channel). For operators and for
// tests that kill a plugin on purpose.
func (h *Host) Pid(channel string) int {
	in := h.channel(channel)
	if in == nil {
		return 0
	}
	in.lock()
	defer in.unlock()
	if in.cur == nil {
		return 0
	}
	return in.cur.Pid()
}

// Admit implements engine.Sender. It returns 0 for a channel it does not
// know: Send then fails the batch with ErrUnknownChannel, which is where the
// error belongs. For a known channel whose plugin never started, the limits
// are unknown and it answers NotReadyWait.
func (h *Host) Admit(channel, recipient string, p heraldtype.Priority, now time.Time) time.Duration {
	in := h.channel(channel)
	if in == nil {
		return 0
	}
	lim := in.limiter()
	if lim == nil {
		return NotReadyWait
	}
	return lim.Admit(recipient, p, now)
}

// Send implements engine.Sender. A batch that fails because the plugin
// died is sent once more, unchanged, on the restarted plugin before Send
// gives up. Cancelling ctx cancels the send in the plugin too. A batch
// over the protocol's message limit goes in parts (see sendParts).
func (h *Host) Send(ctx context.Context, channel string, batch []heraldtype.Message) ([]heraldtype.Result, error) {
	h.mu.Lock()
	closed, started := h.closed, h.started
	h.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	// The batch is counted in flight under the lock a reload takes to
	// swap the channel out, so a retired instance is stopped only after
	// every batch it took has finished.
	h.imu.RLock()
	in, ok := h.instances[channel]
	if ok {
		in.inflight.Add(1)
		in.countSend(1)
	}
	h.imu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownChannel, channel)
	}
	defer func() {
		in.countSend(-1)
		in.inflight.Done()
	}()
	if len(batch) == 0 {
		return []heraldtype.Result{}, nil
	}
	if !started {
		return nil, fmt.Errorf("%w: channel %s: the plugin host was not started", ErrUnavailable, channel)
	}
	return in.sendParts(ctx, batch)
}

// checked checks a plugin's results against its batch and scrubs the
// channel's secrets from their texts.
func (in *instance) checked(batch []heraldtype.Message, results []heraldtype.Result) ([]heraldtype.Result, error) {
	want := make(map[string]bool, len(batch))
	for _, m := range batch {
		want[m.ID] = true
	}
	out := make([]heraldtype.Result, 0, len(results))
	for _, r := range results {
		if !want[r.ID] {
			return nil, fmt.Errorf("%w: channel %s: result for id %q, which is not in the batch or was answered twice", ErrBadResponse, in.name, r.ID)
		}
		if !r.Status.Known() {
			return nil, fmt.Errorf("%w: channel %s: id %q: unknown status %d", ErrBadResponse, in.name, r.ID, r.Status)
		}
		delete(want, r.ID)
		r.RetryAfter = max(r.RetryAfter, 0)
		// Redacted before the cut, so that no piece of a secret survives it.
		r.Code, r.Error = cutText(in.redact(r.Code)), cutText(in.redact(r.Error))
		out = append(out, r)
	}
	if len(want) > 0 {
		missing := make([]string, 0, len(want))
		for id := range want {
			missing = append(missing, id)
		}
		slices.Sort(missing)
		return nil, fmt.Errorf("%w: channel %s: no result for %d of %d messages (first: %q)", ErrBadResponse, in.name, len(missing), len(batch), missing[0])
	}
	return out, nil
}

// cutText keeps the first MaxResultText bytes of s, cut on a rune boundary,
// and says how long s was.
func cutText(s string) string {
	if len(s) <= MaxResultText {
		return s
	}
	k := MaxResultText
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	return fmt.Sprintf("%s… [cut: %d bytes in all]", s[:k], len(s))
}
