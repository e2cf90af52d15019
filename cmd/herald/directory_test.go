package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/leader"
	"github.com/heraldhq/herald/engine/schedule"
	"github.com/heraldhq/herald/plugins/wecom"
	"github.com/heraldhq/herald/plugins/wecomfake"
	"github.com/heraldhq/herald/rules"
)

// bigCorp is a corp of n people in 12 departments (a root, 销售部 with
// three regional teams, and seven more under the root, each led by its
// first member) and 3 tags (every person carries one; region-east also
// tags the 华东销售 department).
func bigCorp(n int) wecomfake.CorpConfig {
	names := []string{"总部", "销售部", "华东销售", "华北销售", "华南销售", "市场部", "研发部", "产品部", "运维部", "财务部", "人事部", "客服部"}
	c := wecomfake.CorpConfig{ID: "wwbig", Apps: []wecomfake.AppConfig{{AgentID: 1000002, Secret: "big-corp-secret-0123456789"}}}
	for i, name := range names {
		d := wecomfake.DepartmentConfig{ID: i + 1, Name: name, Parent: 1, Order: 100 - i}
		switch {
		case i == 0:
			d.Parent = 0
		case i >= 2 && i <= 4:
			d.Parent = 2
		}
		c.Departments = append(c.Departments, d)
	}
	tags := []wecomfake.TagConfig{{ID: 1, Name: "region-east", Departments: []int{3}}, {ID: 2, Name: "region-west"}, {ID: 3, Name: "region-north"}}
	for i := range n {
		id := fmt.Sprintf("u%04d", i)
		dept := i%len(names) + 1
		c.Members = append(c.Members, wecomfake.MemberConfig{UserID: id, Name: fmt.Sprintf("员工%04d", i), Departments: []int{dept}})
		if i < len(names) {
			c.Departments[dept-1].Leaders = []string{id}
		}
		tags[i%3].UserIDs = append(tags[i%3].UserIDs, id)
	}
	c.Tags = tags
	return c
}

// Against the fake WeCom: 1,000 people in 12 departments and 3 tags. The
// leader reads the directory and replicates it; the weekly_report run
// records the snapshot's hash and reaches every department leader with
// their team. A person moved between departments in WeCom is in the new
// manager's report at the next run (and previews agree with the plan); a
// refresh that fails keeps the snapshot in force and raises one alert.
func TestDirectoryFromFakeWecom(t *testing.T) {
	fake := wecomfake.New(wecomfake.Config{Corps: []wecomfake.CorpConfig{bigCorp(1000)}})
	srv := httptest.NewServer(fake.Handler())
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		hc.CloseIdleConnections()
		srv.Close()
	})
	dir := t.TempDir()
	example, err := fs.ReadFile(rules.ExamplesFS(), "weekly_report.lua")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "weekly_report.lua"), example, 0o644))
	set, err := rules.Load(rules.Config{Dir: dir, RescanInterval: time.Hour})
	require.NoError(t, err)

	cfg := directoryConfig{CorpID: "wwbig", Secret: "big-corp-secret-0123456789", BaseURL: srv.URL, Interval: "10m"}
	ds, err := cfg.settings(nil)
	require.NoError(t, err)
	src, err := newWecomDirectory(ds, hc)
	require.NoError(t, err)

	repl := enginetest.New()
	clock := enginetest.NewClock(time.Date(2026, 11, 23, 9, 0, 30, 0, time.FixedZone("CST", 8*3600)))
	refresh := make(chan struct{}, 1)
	lead, err := leader.New(leader.Config{
		NodeID: "n1", FSM: repl.FSM, Replicator: repl, Rules: set, Sender: &enginetest.Sender{},
		ScheduleFunc: func(r engine.Rule) (engine.Schedule, error) {
			return schedule.New(schedule.Spec{Cron: r.Schedule, Timezone: r.Timezone, Calendar: r.Calendar, Shift: r.Shift}, set.Calendars())
		},
		NowFunc: clock.Now, Logger: newLogger("error", ""),
		DirectoryConfig: leader.DirectoryConfig{Directory: src, DirectoryRefresh: refresh},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { lead.Run(ctx) })
	wg.Go(func() { syncDirectory(ctx, repl.FSM, set, newLogger("error", "")) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})

	eventually(t, 30*time.Second, "the first snapshot in force on the node", func() bool {
		cur, _ := repl.FSM.Directory()
		return cur != nil && set.DirectoryHash() == cur.Hash
	})
	first, _ := repl.FSM.Directory()
	require.Len(t, first.UserIDs, 1000)

	// run fires weekly_report's slot by hand, waits for its plan and
	// returns each recipient's message.
	run := func(slot time.Time) (*engine.Run, map[string]string) {
		t.Helper()
		key := engine.RunKey("weekly_report", slot)
		require.Nil(t, repl.MustApply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: "weekly_report", Slot: slot,
			Zone: "Asia/Shanghai", Manual: true, RulesHash: set.Hash(), Now: clock.Now()}))
		eventually(t, 30*time.Second, "run "+key+" planned", func() bool {
			r, ok := repl.FSM.Run(key)
			return ok && r.State != engine.RunPlanning
		})
		r, _ := repl.FSM.Run(key)
		require.Empty(t, r.Error)
		msgs := map[string]string{}
		for _, d := range repl.FSM.RunDeliveries(key) {
			var p struct{ Content string }
			require.NoError(t, json.Unmarshal(d.Payload, &p))
			msgs[d.Recipient] = p.Content
		}
		return r, msgs
	}
	slot1 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.FixedZone("CST", 8*3600))
	run1, msgs := run(slot1)
	require.Equal(t, first.Hash, run1.DirectoryHash, "the run records the snapshot it was planned with")
	// Every department leader manages their department's members (and
	// the leaders of the departments below it); 总部's leader has no
	// manager.
	require.Len(t, msgs, 12, "the 12 department leaders are the managers")
	require.Contains(t, msgs["u0004"], "员工0016", "u0016 is in 华南销售 (dept 5), led by u0004")
	require.NotContains(t, msgs["u0006"], "员工0016")

	// Preview on this node, with the snapshot in force, agrees with the plan.
	prev, err := set.Preview(context.Background(), "weekly_report", slot1, nil)
	require.NoError(t, err)
	require.Equal(t, run1.DirectoryHash, prev.DirectoryHash)
	require.Len(t, prev.Deliveries, len(msgs))

	// u0016 moves from 华南销售 to 研发部 (led by u0006) in WeCom.
	require.NoError(t, fake.MoveMember("wwbig", "u0016", []int{7}))
	refresh <- struct{}{}
	eventually(t, 30*time.Second, "the refreshed snapshot in force on the node", func() bool {
		cur, _ := repl.FSM.Directory()
		return cur.Hash != first.Hash && set.DirectoryHash() == cur.Hash
	})
	second, _ := repl.FSM.Directory()
	clock.Set(clock.Now().Add(7 * 24 * time.Hour))
	run2, msgs := run(slot1.Add(7 * 24 * time.Hour))
	require.Equal(t, second.Hash, run2.DirectoryHash)
	require.NotContains(t, msgs["u0004"], "员工0016", "the next run follows the directory")
	require.Contains(t, msgs["u0006"], "员工0016")

	// WeCom fails: the snapshot in force stays, one alert however often it
	// fails.
	require.NoError(t, fake.AddFault(wecomfake.Fault{Kind: wecomfake.FaultErrcode, Code: -1, Path: "user/simplelist"}))
	for i := range 3 {
		calls := fake.Calls(wecomfake.PathUserSimpleList)
		clock.Set(clock.Now().Add(11 * time.Minute))
		refresh <- struct{}{}
		eventually(t, 30*time.Second, fmt.Sprintf("failed refresh %d", i+1), func() bool {
			_, ok := repl.FSM.Alert(engine.AlertID(engine.AlertDirectoryRefresh))
			return ok && fake.Calls(wecomfake.PathUserSimpleList) > calls
		})
	}
	al, _ := repl.FSM.Alert(engine.AlertID(engine.AlertDirectoryRefresh))
	require.Equal(t, 1, al.Count, "one alert")
	require.Contains(t, al.Message, "errcode -1")
	cur, _ := repl.FSM.Directory()
	require.Equal(t, second.Hash, cur.Hash, "the last good snapshot stays in force")
	require.Equal(t, second.Hash, set.DirectoryHash())
	require.True(t, strings.HasPrefix(cur.Source, "wecom:wwbig"))
}

func TestDirectoryConfig(t *testing.T) {
	t.Setenv("HERALD_TEST_DIR_SECRET", "s3cret-value")
	channels := map[string]map[string]any{
		"wecom_sales": {"plugin": "wecom", "corp_id": "ww1", "agent_id": 1000002, "secret": "${HERALD_TEST_DIR_SECRET}", "base_url": "http://127.0.0.1:1"},
		"wecom_robot": {"plugin": "wecom", "robot_key": "k"},
		"mock":        {"plugin": "mock"},
	}
	s, err := (&directoryConfig{Channel: "wecom_sales", MaxRemoval: "30%", Interval: "5m"}).settings(channels)
	require.NoError(t, err)
	require.Equal(t, "s3cret-value", s.contacts.Secret, "the channel's ${ENV} secret is resolved")
	require.Equal(t, "ww1", s.contacts.CorpID)
	require.Equal(t, "http://127.0.0.1:1", s.contacts.BaseURL)
	require.InDelta(t, 0.3, s.maxRemoval, 1e-9)
	require.Equal(t, 5*time.Minute, s.interval)
	s, err = (&directoryConfig{CorpID: "ww2", Secret: "own-secret"}).settings(nil)
	require.NoError(t, err)
	require.InDelta(t, leader.DirectoryMaxRemovalDefault, s.maxRemoval, 1e-9)
	require.Equal(t, leader.DirectoryIntervalDefault, s.interval)
	require.Equal(t, "wecom:ww2", s.source)

	for _, tc := range []struct {
		cfg  directoryConfig
		want string
	}{
		{directoryConfig{Channel: "nope"}, `channel "nope" is not in channels`},
		{directoryConfig{Channel: "mock"}, `is a "mock" channel`},
		{directoryConfig{Channel: "wecom_robot"}, "a robot channel cannot read contacts"},
		{directoryConfig{}, "give channel"},
		{directoryConfig{CorpID: "ww", Secret: "${HERALD_TEST_DIR_UNSET}"}, "HERALD_TEST_DIR_UNSET"},
		{directoryConfig{Channel: "wecom_sales", MaxRemoval: "150%"}, "max_removal"},
		{directoryConfig{Channel: "wecom_sales", MaxRemoval: "0"}, "max_removal"},
		{directoryConfig{Channel: "wecom_sales", Interval: "soon"}, "directory.interval"},
	} {
		_, err := tc.cfg.settings(channels)
		require.ErrorContains(t, err, tc.want, "%+v", tc.cfg)
		require.NotContains(t, err.Error(), "s3cret-value")
	}
}

func TestDirectoryFromContactsManagersAndTags(t *testing.T) {
	t.Parallel()
	c := &wecom.Contacts{
		Departments: []wecom.Department{
			{ID: 1, Name: "总部", Leaders: []string{"boss"}},
			{ID: 2, ParentID: 1, Name: "销售部", Leaders: []string{"sales-lead"}},
			{ID: 3, ParentID: 2, Name: "华东销售"},
		},
		Users: []wecom.User{
			{UserID: "boss", Departments: []int{1}},
			{UserID: "sales-lead", Departments: []int{2}},
			{UserID: "rep", Name: "Rep", Departments: []int{3, 2}},
		},
		Tags: []wecom.Tag{{ID: 1, Name: "region-east", Departments: []int{2}}, {ID: 2, Name: "vip", UserIDs: []string{"boss"}}},
	}
	snap := directoryFromContacts(c, "wecom:x")
	byID := map[string]rules.DirectoryPerson{}
	for _, p := range snap.People {
		byID[p.UserID] = p
	}
	require.Empty(t, byID["boss"].Manager, "the root's leader has no manager")
	require.Equal(t, "boss", byID["sales-lead"].Manager, "a leader's manager leads the department above")
	require.Equal(t, "sales-lead", byID["rep"].Manager, "no leader in 华东销售: the one above")
	require.Equal(t, []string{"华东销售", "销售部"}, byID["rep"].Departments)
	require.Equal(t, []string{"region-east"}, byID["rep"].Tags, "a tagged department tags the departments below it")
	require.Equal(t, []string{"vip"}, byID["boss"].Tags)
}

// The CLI: show, confirm a held refresh, and preview with a node's
// snapshot.
func TestDirectoryCmd(t *testing.T) {
	t.Parallel()
	addr, node := startAPI(t)
	out, err := runHerald(t, "directory", "--addr", addr, "--tz", "Asia/Shanghai")
	require.NoError(t, err)
	require.Contains(t, out, "in force: none")

	body, err := (&rules.DirectorySnapshot{Source: "wecom:x", People: []rules.DirectoryPerson{
		{UserID: "lead", Name: "组长", Departments: []string{"销售部"}},
		{UserID: "rep", Name: "销售", Departments: []string{"销售部"}, Tags: []string{"region-east"}, Manager: "lead"},
	}}).EncodeJSON()
	require.NoError(t, err)
	hash := rules.DirectoryHash(body)
	node.apply(t, engine.CmdHoldDirectory, engine.HoldDirectory{Hash: hash, Source: "wecom:x", Body: body,
		UserIDs: []string{"lead", "rep"}, Removed: []string{"gone"}, FetchedAt: cliNow, Now: cliNow})
	out, err = runHerald(t, "directory", "show", "--addr", addr, "--tz", "Asia/Shanghai")
	require.NoError(t, err)
	require.Contains(t, out, "would remove 1 people: gone")
	require.Contains(t, out, "confirm with: herald directory confirm "+hash)
	require.Contains(t, out, "+08:00", "times say their offset")

	_, err = runHerald(t, "directory", "confirm", "0000", "--addr", addr)
	require.ErrorContains(t, err, "another hash")
	out, err = runHerald(t, "directory", "confirm", hash, "--by", "ops", "--addr", addr)
	require.NoError(t, err)
	require.Contains(t, out, "in force: "+hash)
	require.Contains(t, out, "confirmed by loopback", "who the node verified")
	require.Contains(t, out, "note: ops", "--by is a note beside it")

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "east.lua"), []byte(`return rule { name = "east", channel = "mock",
  recipients = function(run) return people.in_tag "region-east" end,
  message = function(run, to) return { msgtype = "text", content = "hi " .. to.name .. ", " .. people.manager_of(to).name } end }`), 0o644))
	out, err = runHerald(t, "rules", "preview", "east", "--dir", dir, "--directory", addr, "--at", "2026-12-01T09:00:00+08:00", "--data", "{}")
	require.NoError(t, err)
	require.Contains(t, out, "directory: "+hash+" (2 people")
	require.Contains(t, out, `hi 销售, 组长`)
}

func TestDirectoryWarnings(t *testing.T) {
	t.Parallel()
	n := enginetest.New()
	require.Empty(t, directoryWarnings(n.FSM, ""))
	n.MustApply(t, engine.CmdSetDirectory, engine.SetDirectory{Hash: "h1", Source: "s", Body: []byte(`{}`), UserIDs: []string{"a", "b"}})
	require.Empty(t, directoryWarnings(n.FSM, "h1"))
	require.Len(t, directoryWarnings(n.FSM, ""), 1, "the node lags")
	n.MustApply(t, engine.CmdHoldDirectory, engine.HoldDirectory{Hash: "h2", Source: "s", Body: []byte(`{}`), Removed: []string{"a", "b"}})
	w := directoryWarnings(n.FSM, "h1")
	require.Len(t, w, 1)
	require.Contains(t, w[0], "herald directory confirm h2")
}
