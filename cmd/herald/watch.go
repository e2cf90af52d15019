package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/cluster"
	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/heraldtype"
	"github.com/heraldhq/herald/engine/leader"
)

// The ops watch turns what only a node can see into alerts within a
// minute: a rule file broken on any node (a channel typo, a syntax error),
// a channel that stays unhealthy, members whose rule sets differ, and a
// member that cannot write its data dir (diskwatch.go).
// Every node runs it (each keeps herald_rules_mismatch); only the leader
// raises alerts, through the log like every alert.

// Defaults of the ops watch.
const (
	watchEvery       = 10 * time.Second
	mismatchAfter    = time.Minute // rule sets may differ this long (a deploy under way)
	channelDownAfter = time.Minute // a channel may be unhealthy this long (a plugin restart)
)

// peerRules is what one member answered about its rule set.
type peerRules struct {
	ID     string
	Hash   string // "" when it did not answer
	Broken []string
}

// opsWatch holds what the watch remembers between passes. Its inputs are
// funcs, so a test drives runOnce with a fake clock and fake members.
type opsWatch struct {
	isLeader func() bool
	raise    func(ctx context.Context, a engine.RaiseAlert) error
	peers    func(ctx context.Context) []peerRules
	channels func() []heraldtype.ChannelStatus
	now      func() time.Time
	mismatch prometheus.Gauge
	log      *slog.Logger
	// reports are the members' reports (cluster.Node.MemberReports; nil:
	// no disk checks); alert reads an alert, ack resolves one.
	reports func() []cluster.MemberReport
	alert   func(id string) (*engine.Alert, bool)
	ack     func(ctx context.Context, id string) error

	mu             sync.Mutex
	mismatchSince  time.Time
	mismatchRaised bool
	downSince      map[string]time.Time
	downRaised     map[string]bool
	brokenRaised   map[string]string // cause → message raised
	diskRaised     map[string]string // cause → message raised, without the free bytes
}

func newOpsWatch(w *opsWatch) *opsWatch {
	w.downSince, w.downRaised, w.brokenRaised, w.diskRaised = map[string]time.Time{}, map[string]bool{}, map[string]string{}, map[string]string{}
	return w
}

func (w *opsWatch) run(ctx context.Context) {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		w.runOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runOnce looks once and raises what is due.
func (w *opsWatch) runOnce(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	leader := w.isLeader()
	peers := w.peers(ctx)
	w.checkMismatch(ctx, peers, now, leader)
	w.checkBroken(ctx, peers, now, leader)
	w.checkChannels(ctx, now, leader)
	w.checkDisks(ctx, now, leader)
}

func (w *opsWatch) raiseAlert(ctx context.Context, a engine.RaiseAlert) bool {
	if err := w.raise(ctx, a); err != nil {
		w.log.Warn("cannot raise alert", "cause", a.Cause, "err", err)
		return false
	}
	return true
}

func (w *opsWatch) checkMismatch(ctx context.Context, peers []peerRules, now time.Time, leader bool) {
	hashes := map[string][]string{}
	for _, p := range peers {
		if p.Hash != "" {
			hashes[p.Hash] = append(hashes[p.Hash], p.ID)
		}
	}
	if len(hashes) < 2 {
		w.mismatch.Set(0)
		w.mismatchSince, w.mismatchRaised = time.Time{}, false
		return
	}
	w.mismatch.Set(1)
	if w.mismatchSince.IsZero() {
		w.mismatchSince = now
	}
	if !leader || w.mismatchRaised || now.Sub(w.mismatchSince) < mismatchAfter {
		return
	}
	var parts []string
	for _, h := range slices.Sorted(maps.Keys(hashes)) {
		ids := hashes[h]
		slices.Sort(ids)
		parts = append(parts, fmt.Sprintf("%s run %s", strings.Join(ids, ", "), h[:min(12, len(h))]))
	}
	w.mismatchRaised = w.raiseAlert(ctx, engine.NewRaiseAlert(engine.AlertCause{Kind: engine.AlertRulesMismatch}, "",
		engine.AlertParams{Error: strings.Join(parts, "; "), Since: w.mismatchSince}, fmt.Sprintf(
			"the nodes' rule sets have differed since %s: %s; deploy the same rules directory to every node",
			w.mismatchSince.UTC().Format(time.RFC3339), strings.Join(parts, "; ")), now))
}

func (w *opsWatch) checkBroken(ctx context.Context, peers []peerRules, now time.Time, leader bool) {
	type brokenFile struct {
		msg   string
		nodes []string
	}
	files := map[string]*brokenFile{}
	for _, p := range peers {
		for _, b := range p.Broken {
			file, _, _ := strings.Cut(b, ":")
			f := files[file]
			if f == nil {
				f = &brokenFile{msg: b}
				files[file] = f
			}
			f.nodes = append(f.nodes, p.ID)
		}
	}
	seen := map[string]bool{}
	for _, file := range slices.Sorted(maps.Keys(files)) {
		f := files[file]
		slices.Sort(f.nodes)
		cause := engine.AlertCause{Kind: engine.AlertRuleBroken, Subject: file}.Key()
		seen[cause] = true
		msg := fmt.Sprintf("rule file %s is broken on %s: %s; its last good version stays in force", file, strings.Join(f.nodes, ", "), f.msg)
		if !leader || w.brokenRaised[cause] == msg {
			continue
		}
		if w.raiseAlert(ctx, engine.NewRaiseAlert(engine.AlertCause{Kind: engine.AlertRuleBroken, Subject: file}, "",
			engine.AlertParams{File: file, Nodes: f.nodes, Error: f.msg}, msg, now)) {
			w.brokenRaised[cause] = msg
		}
	}
	for cause := range w.brokenRaised {
		if !seen[cause] {
			delete(w.brokenRaised, cause) // fixed: breaking it again alerts again
		}
	}
}

func (w *opsWatch) checkChannels(ctx context.Context, now time.Time, leader bool) {
	seen := map[string]bool{}
	for _, c := range w.channels() {
		if c.Healthy {
			continue
		}
		seen[c.Name] = true
		since, ok := w.downSince[c.Name]
		if !ok {
			since = now
			w.downSince[c.Name] = now
		}
		if !leader || w.downRaised[c.Name] || now.Sub(since) < channelDownAfter {
			continue
		}
		why := c.Error
		if why == "" {
			why = "unhealthy"
		}
		w.downRaised[c.Name] = w.raiseAlert(ctx, engine.NewRaiseAlert(engine.AlertCause{Kind: engine.AlertChannelDown, Subject: c.Name}, "",
			engine.AlertParams{Channel: c.Name, Since: since, Error: why}, fmt.Sprintf(
				"channel %s (plugin %s) has been unhealthy since %s: %s; its messages wait and expire at their deadline",
				c.Name, c.Plugin, since.UTC().Format(time.RFC3339), why), now))
	}
	for name := range w.downSince {
		if !seen[name] {
			delete(w.downSince, name)
			delete(w.downRaised, name)
		}
	}
}

// startOpsWatch wires the watch to a node.
func (n *node) startOpsWatch(ctx context.Context, reg prometheus.Registerer) {
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "herald_rules_mismatch",
		Help: "1 while the members answer with different rule set hashes (their rules directories differ), else 0.",
	})
	reg.MustRegister(gauge)
	w := newOpsWatch(&opsWatch{
		isLeader: n.raft.IsLeader,
		raise: func(ctx context.Context, a engine.RaiseAlert) error {
			return n.propose(ctx, engine.CmdRaiseAlert, a)
		},
		reports: n.raft.MemberReports,
		alert:   n.fsm.Alert,
		ack: func(ctx context.Context, id string) error {
			return n.propose(ctx, engine.CmdAckAlert, engine.AckAlert{ID: id})
		},
		peers: func(ctx context.Context) []peerRules {
			ctx, cancel := context.WithTimeout(ctx, watchPeersTimeout)
			defer cancel()
			return n.peerRules(ctx, n.raft.Status().Members)
		},
		channels: n.host.Status,
		now:      time.Now,
		mismatch: gauge,
		log:      n.log.With("component", "ops-watch"),
	})
	n.wg.Go(func() { w.run(ctx) })
}

// propose commits one command of the ops watch, within ProposeTimeout.
func (n *node) propose(ctx context.Context, t engine.CommandType, body any) error {
	cmd, err := engine.Encode(t, body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, leader.ProposeTimeout)
	defer cancel()
	res, err := n.raft.Apply(ctx, cmd)
	if err != nil {
		return err
	}
	if e, ok := res.(error); ok {
		return e
	}
	return nil
}

// How long the members may take to say which rule set they run: status
// answers a person who is waiting; the watch runs in the background and
// gives a slow member longer before counting it silent.
const (
	statusPeersTimeout = 500 * time.Millisecond
	watchPeersTimeout  = 2 * time.Second
)

// peerRules asks the members, at once and until ctx ends, which rule set
// each runs and which of its files are broken; this node answers from its
// own rule set. Answer i is members[i]'s; one that did not answer has no
// hash. Status and the ops watch both ask through here.
func (n *node) peerRules(ctx context.Context, members []cluster.MemberStatus) []peerRules {
	out := make([]peerRules, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		out[i].ID = m.ID
		if m.ID == n.cfg.NodeID {
			out[i].Hash, out[i].Broken = n.rules.Hash(), n.rules.Broken()
			continue
		}
		if m.HTTPAddr == "" {
			continue
		}
		wg.Go(func() {
			var v api.RulesHashView
			if err := n.peerClient(m.HTTPAddr).Do(ctx, http.MethodGet, "/v1/rules/hash", nil, &v); err == nil {
				out[i].Hash, out[i].Broken = v.RulesHash, v.Broken
			}
		})
	}
	wg.Wait()
	return out
}
