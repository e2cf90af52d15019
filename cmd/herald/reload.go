package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/leader"
)

// reloadTimeout bounds a reload's wait for new channel plugins' first
// start (they keep starting after it).
const reloadTimeout = 30 * time.Second

// reloadableKeys are the scalar keys a reload applies; every other scalar
// key must be as the node started with it (reloadRefused). The list keys
// tokens, channels, plugin_sha256 and directory are reloadable too.
var reloadableKeys = []string{"log_level", "audit_retention", "retention", "ledger_retention"}

// reloadState is the config in force and the last reload, for
// /v1/status config.
type reloadState struct {
	mu       sync.Mutex
	cur      *nodeConfig
	loadedAt time.Time
	last     *api.ReloadStatus
}

func (r *reloadState) start(cfg *nodeConfig) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur, r.loadedAt = cfg, time.Now()
}

// live is the config in force: the one the node started with, or the
// last reload's.
func (n *node) live() *nodeConfig {
	n.reload.mu.Lock()
	defer n.reload.mu.Unlock()
	if n.reload.cur == nil { // before start records it: the config given
		return &n.cfg
	}
	return n.reload.cur
}

func (r *reloadState) status(zone *time.Location) *api.ConfigStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := &api.ConfigStatus{LoadedAt: r.loadedAt.In(zone)}
	if r.last != nil {
		last := *r.last
		last.At = last.At.In(zone)
		st.LastReload = &last
	}
	return st
}

// reloadFrom reads the config again as the agent's command line gave it
// (--config file, HERALD_* variables, flags) and applies it; the outcome
// is logged and kept for /v1/status. A config that fails to load or
// changes what cannot change leaves the running one in force.
func (n *node) reloadFrom(cmd *cobra.Command) {
	next := nodeConfig{}
	err := next.load(cmd)
	var changed []string
	if err == nil {
		changed, err = n.apply(next)
	}
	at := time.Now()
	n.reload.mu.Lock()
	n.reload.last = &api.ReloadStatus{At: at, OK: err == nil, Changed: changed}
	if err != nil {
		n.reload.last.Error = err.Error()
	}
	n.reload.mu.Unlock()
	if err != nil {
		n.log.Error("config reload refused; the running config stays in force", "err", err)
		return
	}
	n.log.Info("config reloaded", "changed", strings.Join(changed, ","))
}

// apply checks next against the config in force and applies what changed.
// Everything that can fail is checked before anything is applied: a
// refused reload changes nothing.
func (n *node) apply(next nodeConfig) ([]string, error) {
	cur := n.live()
	next.devTimeouts, next.raftLogLevel, next.writeFault, next.logLevel = cur.devTimeouts, cur.raftLogLevel, cur.writeFault, cur.logLevel
	next = next.withDirDefaults()
	if err := reloadRefused(cur, &next); err != nil {
		return nil, err
	}
	changed := reloadChanges(cur, &next)
	if len(changed) == 0 {
		return nil, nil
	}
	if err := n.reloadFits(cur, &next); err != nil {
		return nil, err
	}
	var dir leader.DirectorySource
	var ds directorySettings
	if next.Directory != nil {
		var err error
		if ds, err = next.Directory.settings(next.Channels); err != nil {
			return nil, err
		}
		if dir, err = newWecomDirectory(ds, &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}); err != nil {
			return nil, err
		}
	}
	// The channels first: the only step that can still fail (a plugin
	// that is unknown, a channel's ${ENV} unset), and it fails whole.
	ctx, cancel := context.WithTimeout(context.Background(), reloadTimeout)
	res, err := n.host.Reload(ctx, channelConfigs(next.Channels, n.zone.String()), next.PluginSHA256)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("config reload: %w", err)
	}
	if !res.Empty() {
		n.log.Info("channels reloaded", "added", res.Added, "removed", res.Removed, "changed", res.Changed)
	}
	// Then the rules, which may now name the new channels (a rule refused
	// for naming one loads now).
	_, ledger, _ := next.retentions() // validated by load
	if err := n.rules.SetChannels(next.channelNames(), ledger); err != nil {
		n.log.Warn("rules directory unreadable on reload; the rules in force stay", "err", err)
	}
	n.tokens.Set(next.apiTokens)
	n.raft.SetTokens(nodeToken(next.apiTokens), nodeReadToken(next.apiTokens, next.clusterSecret != ""))
	if n.lead != nil {
		retention, ledger, _ := next.retentions()
		audit, _ := parseAuditRetention(next.AuditRetention)
		n.lead.Reconfigure(leader.Reloadable{Retention: retention, LedgerRetention: ledger, AuditRetention: audit,
			Directory: dir, DirectoryInterval: ds.interval, DirectoryMaxRemoval: ds.maxRemoval})
	}
	if next.logLevel != nil {
		next.logLevel.Set(parseLogLevel(next.LogLevel))
	}
	if slices.Contains(changed, "directory") && next.Directory != nil {
		select {
		case n.dirRefresh <- struct{}{}: // a new directory section: read it now
		default:
		}
	}
	n.reload.mu.Lock()
	n.reload.cur, n.reload.loadedAt = &next, time.Now()
	n.reload.mu.Unlock()
	return changed, nil
}

// reloadRefused names the settings next changes that a running node
// cannot: its identity, its data, its addresses, its TLS files (rotated
// in place instead), its rules directory, timing it was built with.
func reloadRefused(cur, next *nodeConfig) error {
	var fixed []string
	nk, ck := next.keys(), cur.keys()
	for i, k := range ck {
		if slices.Contains(reloadableKeys, k.yaml) {
			continue
		}
		if k.str != nil && *k.str != *nk[i].str || k.boolean != nil && *k.boolean != *nk[i].boolean {
			fixed = append(fixed, k.yaml)
		}
	}
	if len(fixed) == 0 {
		return nil
	}
	return fmt.Errorf("config reload refused: %s cannot change while the node runs (restart the node to change %s); nothing was applied",
		strings.Join(fixed, ", "), map[bool]string{true: "it", false: "them"}[len(fixed) == 1])
}

// reloadChanges names the reloadable settings next changes.
func reloadChanges(cur, next *nodeConfig) []string {
	var out []string
	nk, ck := next.keys(), cur.keys()
	for i, k := range ck {
		if slices.Contains(reloadableKeys, k.yaml) && *k.str != *nk[i].str {
			out = append(out, k.yaml)
		}
	}
	if !reflect.DeepEqual(cur.apiTokens, next.apiTokens) {
		out = append(out, "tokens")
	}
	if !reflect.DeepEqual(cur.Channels, next.Channels) {
		out = append(out, "channels")
	}
	if !maps.Equal(cur.PluginSHA256, next.PluginSHA256) {
		out = append(out, "plugin_sha256")
	}
	if !reflect.DeepEqual(cur.Directory, next.Directory) {
		out = append(out, "directory")
	}
	slices.Sort(out)
	return out
}

// reloadFits refuses what the rules in force could not live with: a
// channel removed that a rule sends through (its deliveries would fail),
// or a ledger_retention no longer longer than a rule's catchup (a slot
// caught up after its key was forgotten would send twice).
func (n *node) reloadFits(cur, next *nodeConfig) error {
	_, ledger, _ := next.retentions() // validated by load
	var errs []error
	for _, name := range callbackChanges(cur.Channels, next.Channels) {
		errs = append(errs, fmt.Errorf("channel %q: its WeCom callback settings (%s, corp_id, secret, base_url) cannot change while the node runs (the receiver is built at start): restart the node",
			name, strings.Join(nodeOnlyChannelKeys[1:], ", ")))
	}
	for _, r := range n.rules.Rules() {
		if _, ok := next.Channels[r.Channel]; !ok && r.Channel != "" {
			if _, had := cur.Channels[r.Channel]; had {
				errs = append(errs, fmt.Errorf("channel %q is removed, but rule %s sends through it: change or remove the rule first", r.Channel, r.Name))
			}
		}
		catchup := r.Catchup
		if catchup == 0 {
			catchup = engine.DefaultCatchup
		}
		if catchup >= ledger {
			errs = append(errs, fmt.Errorf("ledger_retention %s is not longer than rule %s's catchup %s", ledger, r.Name, catchup))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("config reload refused; nothing was applied: %w", errors.Join(errs...))
	}
	return nil
}

// callbackChanges names the wecom channels with a callback (before or
// after) whose callback settings differ.
func callbackChanges(cur, next map[string]map[string]any) []string {
	keys := []string{keyCallbackToken, keyCallbackAESKey, "corp_id", "secret", "base_url"}
	hasCallback := func(ch map[string]any) bool {
		return ch != nil && (ch[keyCallbackToken] != nil || ch[keyCallbackAESKey] != nil)
	}
	var out []string
	names := maps.Clone(next)
	maps.Copy(names, cur)
	for _, name := range slices.Sorted(maps.Keys(names)) {
		a, b := cur[name], next[name]
		if !hasCallback(a) && !hasCallback(b) {
			continue
		}
		for _, k := range keys {
			if !reflect.DeepEqual(a[k], b[k]) {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// parseLogLevel reads log_level ("" is info; load validated it).
func parseLogLevel(level string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil || level == "" {
		return slog.LevelInfo
	}
	return l
}
