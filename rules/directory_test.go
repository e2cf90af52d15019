package rules

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

func snapshotJSON(t *testing.T, people ...DirectoryPerson) []byte {
	t.Helper()
	b, err := (&DirectorySnapshot{Source: "wecom:test", People: people}).EncodeJSON()
	require.NoError(t, err)
	return b
}

// plannedTo plans rule as a run started with the snapshot in force.
func plannedTo(t *testing.T, s *Set, rule string) []string {
	t.Helper()
	return plannedWith(t, s, rule, s.DirectoryHash())
}

func plannedWith(t *testing.T, s *Set, rule, hash string) []string {
	t.Helper()
	run := engine.RunContext{Rule: rule, Key: "test", Slot: time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC), DirectoryHash: hash}
	got, err := s.Plan(context.Background(), rule, run)
	require.NoError(t, err)
	return plannedIDs(got)
}

func TestDirectoryMergeFileWins(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{
		"people.csv": "userid,name,timezone,roles\nlisi,李四 (file),Europe/Berlin,sales\nlocal,Local,,\n",
		"sales.lua":  simpleRule("sales", `return people.where { department = "销售部" }`),
		"east.lua":   simpleRule("east", `return people.in_tag "region-east"`),
		"mgr.lua": simpleRule("mgr", `local out = {}
    for _, p in ipairs(people.where { department = "销售部" }) do
      local m = people.manager_of(p)
      if m then out[#out+1] = m end
    end
    return out`),
		"show.lua": `return rule { name = "show", channel = "mock",
  recipients = function(run) return { people.get("lisi") } end,
  message = function(run, to)
    return { msgtype = "text", content = to.name .. "|" .. to.department .. "|" .. table.concat(to.departments, ",") ..
      "|" .. table.concat(to.tags, ",") .. "|" .. (to.manager or "") .. "|" .. to.timezone }
  end }`,
	})
	s := load(t, dir)
	require.Empty(t, plannedTo(t, s, "sales"), "no snapshot: the file alone")
	require.Empty(t, s.DirectoryHash())

	snap := snapshotJSON(t,
		DirectoryPerson{UserID: "wangfang", Name: "王芳", Departments: []string{"销售部"}, Tags: []string{"managers"}},
		DirectoryPerson{UserID: "lisi", Name: "李四", Departments: []string{"华东销售", "销售部"}, Tags: []string{"region-east"}, Manager: "wangfang"},
		DirectoryPerson{UserID: "zhangsan", Name: "张三", Departments: []string{"华东销售"}, Tags: []string{"region-east"}, Manager: "lisi"},
		DirectoryPerson{UserID: "boss", Name: "老板", Departments: []string{"总部"}, Manager: "nobody-visible"},
	)
	require.NoError(t, s.SetDirectory(snap))
	require.Equal(t, DirectoryHash(snap), s.DirectoryHash())
	require.Equal(t, 4, s.DirectoryPeople())

	require.Equal(t, []string{"lisi", "wangfang"}, plannedTo(t, s, "sales"), "file people first, then the snapshot's by userid; department matches any")
	require.Equal(t, []string{"lisi", "zhangsan"}, plannedTo(t, s, "east"))
	require.Equal(t, []string{"wangfang"}, plannedTo(t, s, "mgr"))
	got, err := s.Plan(context.Background(), "show", engine.RunContext{Rule: "show", Key: "k", Slot: time.Now(), DirectoryHash: s.DirectoryHash()})
	require.NoError(t, err)
	var payload struct{ Content string }
	require.NoError(t, json.Unmarshal(got[0].Payload, &payload))
	require.Equal(t, "李四 (file)|华东销售|华东销售,销售部|region-east|wangfang|Europe/Berlin", payload.Content,
		"the file's fields win; what it leaves empty comes from the directory")

	// The next snapshot moves zhangsan to 销售部 and drops wangfang.
	first := s.DirectoryHash()
	require.NoError(t, s.SetDirectory(snapshotJSON(t,
		DirectoryPerson{UserID: "lisi", Name: "李四", Departments: []string{"华东销售"}},
		DirectoryPerson{UserID: "zhangsan", Name: "张三", Departments: []string{"销售部"}},
	)))
	require.Equal(t, []string{"zhangsan"}, plannedTo(t, s, "sales"))
	require.Empty(t, plannedTo(t, s, "east"), "tags follow the snapshot too")
	require.Equal(t, []string{"lisi", "wangfang"}, plannedWith(t, s, "sales", first),
		"a run started with the earlier snapshot is planned with it")
	require.Empty(t, plannedWith(t, s, "sales", ""), "a run started before any snapshot sees the file alone")
	_, err = s.Plan(context.Background(), "sales", engine.RunContext{Rule: "sales", Key: "k", Slot: time.Now(), DirectoryHash: "not-yet-here"})
	require.ErrorIs(t, err, engine.ErrDirectoryPending)

	require.ErrorIs(t, s.SetDirectory([]byte(`{"source":"x","people":[{"userid":""}]}`)), ErrDirectory)
	require.Equal(t, []string{"zhangsan"}, plannedTo(t, s, "sales"), "a bad snapshot keeps the one in force")

	require.NoError(t, s.SetDirectory(nil))
	require.Empty(t, plannedTo(t, s, "sales"))
	require.Empty(t, s.DirectoryHash())
}

func TestDirectorySnapshotCanonical(t *testing.T) {
	t.Parallel()
	a := snapshotJSON(t, DirectoryPerson{UserID: "b", Tags: []string{"y", "x"}}, DirectoryPerson{UserID: "a"})
	b := snapshotJSON(t, DirectoryPerson{UserID: "a"}, DirectoryPerson{UserID: "b", Tags: []string{"x", "y", "x"}})
	require.Equal(t, string(a), string(b))
	require.Equal(t, DirectoryHash(a), DirectoryHash(b))
	_, err := ParseDirectorySnapshot([]byte(`{"source":"x","people":[{"userid":"a"},{"userid":"a"}]}`))
	require.ErrorIs(t, err, ErrDirectory)
	_, err = ParseDirectorySnapshot([]byte(`{"source":"x","people":[],"extra":1}`))
	require.ErrorIs(t, err, ErrDirectory)
}

func TestPeopleFileTagsColumn(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{
		"people.csv": "userid,tags,departments\nann,region-east;vip,销售部;市场部\nbob,,\n",
		"east.lua":   simpleRule("east", `return people.where { tag = "vip", department = "市场部" }`),
	})
	s := load(t, dir)
	require.Equal(t, []string{"ann"}, plannedTo(t, s, "east"))
}

// TestUserIDsIgnoreCase: WeCom userids ignore case, so ZhangSan and
// zhangsan are one person. Two rows for them in the people file sent that
// person every message twice; a file row ZhangSan beside the directory's
// zhangsan made two people of one.
func TestUserIDsIgnoreCase(t *testing.T) {
	t.Parallel()
	errs := Check(newDir(t, map[string]string{"people.csv": "userid,name\nZhangSan,张三\nlisi,李四\nzhangsan,张三\n"}))
	require.Len(t, errs, 1, "%v", errs)
	require.Contains(t, errs[0].String(), "people.csv:4")
	require.Contains(t, errs[0].Message, `"ZhangSan"`)

	s := load(t, newDir(t, map[string]string{
		"people.csv": "userid,timezone\nZhangSan,Europe/Berlin\n",
		"all.lua":    simpleRule("all", `return people.all()`),
	}))
	require.NoError(t, s.SetDirectory(snapshotJSON(t,
		DirectoryPerson{UserID: "lisi", Name: "李四"},
		DirectoryPerson{UserID: "zhangsan", Name: "张三", Departments: []string{"销售部"}})))
	require.Equal(t, []string{"ZhangSan", "lisi"}, plannedTo(t, s, "all"))
	p, ok := s.cur.Load().people.Get("ZhangSan")
	require.True(t, ok)
	require.Equal(t, "张三", p.Name, "the file's row is filled from the directory's person")
	require.Equal(t, "销售部", p.Department)
}

func TestRecipientsIgnoreCase(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{
		"people.csv": "userid,manager\nZhangSan,LiSi\nLiSi,\n",
		"r.lua":      simpleRule("r", `return { "zhangsan", "ZHANGSAN", people.manager_of("zhangsan"), "lisi" }`),
	}))
	out, err := plan(t, s, "r", "")
	require.NoError(t, err)
	require.Equal(t, []string{"ZhangSan", "LiSi"}, plannedIDs(out), "one message each, to the userid as the directory writes it")
}
