package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/leader"
	"github.com/heraldhq/herald/plugins/host"
	"github.com/heraldhq/herald/plugins/wecom"
	"github.com/heraldhq/herald/rules"
)

// directoryConfig is the node config's directory: section: people read
// from WeCom's contacts, through a wecom channel's credentials (channel)
// or its own (corp_id, secret, base_url).
type directoryConfig struct {
	// Channel names a wecom channel (app mode) whose corp_id, secret and
	// base_url the directory uses.
	Channel string `yaml:"channel"`
	CorpID  string `yaml:"corp_id"`
	Secret  string `yaml:"secret"`
	BaseURL string `yaml:"base_url"`
	// Interval between refreshes; default 10m.
	Interval string `yaml:"interval"`
	// MaxRemoval is the share of people one refresh may remove before it
	// is held for an operator: "20%" or 0.2; default 20%.
	MaxRemoval string `yaml:"max_removal"`
	// Timeout bounds one WeCom call; default 10s.
	Timeout string `yaml:"timeout"`
}

// directorySettings is a validated directoryConfig, secrets resolved.
type directorySettings struct {
	contacts   wecom.ContactsConfig
	source     string
	interval   time.Duration
	maxRemoval float64
}

// settings validates the section against the node's channels.
func (d *directoryConfig) settings(channels map[string]map[string]any) (directorySettings, error) {
	var s directorySettings
	corp, secret, base := d.CorpID, d.Secret, d.BaseURL
	if d.Channel != "" {
		ch, ok := channels[d.Channel]
		if !ok {
			return s, fmt.Errorf("directory: channel %q is not in channels", d.Channel)
		}
		if p, _ := ch["plugin"].(string); p != "wecom" {
			return s, fmt.Errorf("directory: channel %q is a %q channel; want a wecom app channel", d.Channel, p)
		}
		if corp == "" {
			corp, _ = ch["corp_id"].(string)
		}
		if secret == "" {
			secret, _ = ch["secret"].(string)
		}
		if base == "" {
			base, _ = ch["base_url"].(string)
		}
		if corp == "" || secret == "" {
			return s, fmt.Errorf("directory: channel %q has no corp_id and secret (a robot channel cannot read contacts)", d.Channel)
		}
	}
	var err error
	if secret, err = host.ExpandEnv("directory.secret", secret); err != nil {
		return s, fmt.Errorf("directory: %w", err)
	}
	if corp, err = host.ExpandEnv("directory.corp_id", corp); err != nil {
		return s, fmt.Errorf("directory: %w", err)
	}
	if corp == "" || secret == "" {
		return s, fmt.Errorf("directory: give channel (a wecom app channel) or corp_id and secret")
	}
	s.contacts = wecom.ContactsConfig{BaseURL: base, CorpID: corp, Secret: secret}
	s.source = "wecom:" + corp
	if s.interval, err = positiveDuration("directory.interval", d.Interval, leader.DirectoryIntervalDefault); err != nil {
		return s, err
	}
	if s.contacts.Timeout, err = positiveDuration("directory.timeout", d.Timeout, wecom.TimeoutDefault); err != nil {
		return s, err
	}
	if s.maxRemoval, err = parseShare(d.MaxRemoval); err != nil {
		return s, err
	}
	if _, err := wecom.NewContactsClient(s.contacts); err != nil {
		return s, fmt.Errorf("directory: %w", err)
	}
	return s, nil
}

func positiveDuration(key, v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("config: %s %q: want a positive duration such as 10m", key, v)
	}
	return d, nil
}

// parseShare reads "20%" or 0.2; "" is the default.
func parseShare(v string) (float64, error) {
	if v == "" {
		return leader.DirectoryMaxRemovalDefault, nil
	}
	s, pct := strings.CutSuffix(strings.TrimSpace(v), "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if pct {
		f /= 100
	}
	if err != nil || f <= 0 || f > 1 {
		return 0, fmt.Errorf("config: directory.max_removal %q: want a share such as 20%% (or 0.2), above 0 and at most 100%%", v)
	}
	return f, nil
}

// wecomDirectory reads the directory from WeCom's contacts for the leader.
type wecomDirectory struct {
	client *wecom.ContactsClient
	source string
}

func newWecomDirectory(s directorySettings, hc *http.Client) (*wecomDirectory, error) {
	cfg := s.contacts
	cfg.Client = hc
	c, err := wecom.NewContactsClient(cfg)
	if err != nil {
		return nil, err
	}
	return &wecomDirectory{client: c, source: s.source}, nil
}

// Fetch implements leader.DirectorySource.
func (w *wecomDirectory) Fetch(ctx context.Context) (leader.DirectoryFetch, error) {
	c, err := w.client.Fetch(ctx)
	if err != nil {
		return leader.DirectoryFetch{}, err
	}
	snap := directoryFromContacts(c, w.source)
	body, err := snap.EncodeJSON()
	if err != nil {
		return leader.DirectoryFetch{}, err
	}
	ids := snap.UserIDs()
	slices.Sort(ids)
	return leader.DirectoryFetch{Source: w.source, Body: body, Hash: rules.DirectoryHash(body), UserIDs: ids}, nil
}

// directoryFromContacts turns WeCom's contacts into the people rules see:
// each person's departments by name (WeCom's order, the first is
// `department`), tags (a tag on a department tags everyone in it and below
// it), and a manager: the first leader of the person's first department
// who is not the person, else of the department above, up to the root.
func directoryFromContacts(c *wecom.Contacts, source string) *rules.DirectorySnapshot {
	depts := make(map[int]wecom.Department, len(c.Departments))
	for _, d := range c.Departments {
		depts[d.ID] = d
	}
	visible := make(map[string]bool, len(c.Users))
	for _, u := range c.Users {
		visible[u.UserID] = true
	}
	// below reports whether department id is root or lies under it.
	below := func(id, root int) bool {
		for seen := 0; seen < len(depts)+1; seen++ {
			if id == root {
				return true
			}
			d, ok := depts[id]
			if !ok || d.ParentID == id {
				return false
			}
			id = d.ParentID
		}
		return false
	}
	tagsOf := map[string][]string{}
	for _, t := range c.Tags {
		for _, u := range t.UserIDs {
			tagsOf[u] = append(tagsOf[u], t.Name)
		}
		if len(t.Departments) == 0 {
			continue
		}
		for _, u := range c.Users {
			if slices.ContainsFunc(u.Departments, func(d int) bool {
				return slices.ContainsFunc(t.Departments, func(root int) bool { return below(d, root) })
			}) && !slices.Contains(tagsOf[u.UserID], t.Name) {
				tagsOf[u.UserID] = append(tagsOf[u.UserID], t.Name)
			}
		}
	}
	manager := func(u wecom.User) string {
		if len(u.Departments) == 0 {
			return ""
		}
		id := u.Departments[0]
		for seen := 0; seen < len(depts)+1; seen++ {
			d, ok := depts[id]
			if !ok {
				return ""
			}
			leaders := slices.Sorted(slices.Values(d.Leaders))
			for _, l := range leaders {
				if l != u.UserID && visible[l] {
					return l
				}
			}
			if d.ParentID == 0 || d.ParentID == d.ID {
				return ""
			}
			id = d.ParentID
		}
		return ""
	}
	snap := &rules.DirectorySnapshot{Source: source}
	for _, u := range c.Users {
		p := rules.DirectoryPerson{UserID: u.UserID, Name: u.Name, Tags: tagsOf[u.UserID], Manager: manager(u)}
		for _, d := range u.Departments {
			if dep, ok := depts[d]; ok && dep.Name != "" && !slices.Contains(p.Departments, dep.Name) {
				p.Departments = append(p.Departments, dep.Name)
			}
		}
		snap.People = append(snap.People, p)
	}
	return snap
}

// syncDirectory keeps the rules' directory snapshot equal to the one in
// force in the replicated state, on every node (leader or not), so that
// previews and plans everywhere use the same people. It runs until ctx
// ends.
func syncDirectory(ctx context.Context, fsm *engine.FSM, set *rules.Set, log *slog.Logger) {
	changed, unsubscribe := fsm.Subscribe()
	defer unsubscribe()
	failed := ""
	for {
		cur, _ := fsm.Directory()
		want, body := "", []byte(nil)
		if cur != nil {
			want, body = cur.Hash, cur.Body
		}
		if want != set.DirectoryHash() && want != failed {
			if err := set.SetDirectory(body); err != nil {
				// The leader encoded it; this build cannot read it.
				log.Error("directory snapshot refused; the previous one stays", "hash", want, "err", err)
				failed = want
			} else {
				log.Info("directory snapshot in force", "hash", want, "people", set.DirectoryPeople())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// directoryWarnings says, in /v1/status and the dashboard, that a refresh
// is held for an operator, or that this node's rules lag the snapshot in
// force (it cannot plan runs started with it).
func directoryWarnings(fsm *engine.FSM, nodeHash string) []string {
	cur, held := fsm.Directory()
	var out []string
	if held != nil {
		out = append(out, fmt.Sprintf("directory refresh %s is held: it would remove %d people; `herald directory confirm %s` puts it in force",
			held.Hash, len(held.Removed), held.Hash))
	}
	if cur != nil && cur.Hash != nodeHash {
		out = append(out, fmt.Sprintf("this node's rules use directory snapshot %q, not %s in force", nodeHash, cur.Hash))
	}
	return out
}

var _ leader.DirectorySource = (*wecomDirectory)(nil)
