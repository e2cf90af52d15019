package rules

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"weak"

	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/calendar"
)

// TestPersonStubsLookFull: whatever a rule does first with a person (the
// first thing is what fills a stub), it sees what a full table would show:
// each observation runs on a fresh stub and on a person already read once,
// and both must give the full person's answer.
func TestPersonStubsLookFull(t *testing.T) {
	t.Parallel()
	obs := map[string]struct{ body, want string }{
		"pairs": {`local ks = {} for k in pairs(p) do ks[#ks+1] = k end table.sort(ks) return table.concat(ks, ",")`,
			"departments,manager,name,region,roles,tags,userid"},
		"next":         {`local k = next(p) return tostring(k ~= nil)`, "true"},
		"rawget":       {`return rawget(p, "name") .. "/" .. tostring(rawget(p, "userid"))`, "Ann/ann"},
		"getmetatable": {`return tostring(getmetatable(p))`, "nil"},
		"json":         {`return json.encode(p)`, `{"departments":{},"manager":"boss","name":"Ann","region":"east","roles":["sales"],"tags":{},"userid":"ann"}`},
		"text":         {`return text.render("{{to.name}} {{to.roles.1}} {{to.region}}", { to = p })`, "Ann sales east"},
		"assign":       {`p.name = "X" return p.name .. p.manager`, "Xboss"},
		"assign_nil":   {`p.name = nil return json.encode(p)`, `{"departments":{},"manager":"boss","region":"east","roles":["sales"],"tags":{},"userid":"ann"}`},
		"insert":       {`table.insert(p, "z") return #p .. p[1] .. p.name`, "1zAnn"},
		"len":          {`return #p .. ""`, "0"},
		"setmetatable": {`setmetatable(p, { __index = function() return "dflt" end }) return p.nothing .. p.name`, "dfltAnn"},
		"userid":       {`return p.userid`, "ann"},
		"manager_of":   {`return people.manager_of(p).name`, "Boss"},
		"roles":        {`return #p.roles .. p.roles[1]`, "1sales"},
		"fresh":        {`p.name = "X" return people.get("ann").name`, "Ann"},
		"where_cond":   {`return #people.where(p) .. ""`, "0"},
		// A person as a condition's value is the list of its values (its
		// userid among them), as any table there is.
		"where_value": {`return #people.where { userid = p } .. ""`, "2"},
		"log":         {`log.info("seen", p) return "ok"`, "ok"},
		// pairs hands out its iterator: used on its own, it fills too.
		"pairs_iter": {`local it = pairs({}) local n = 0 for _ in it, p do n = n + 1 end return n .. ""`, "7"},
	}
	files := map[string]string{
		"people.csv": "userid,name,roles,manager,region\nboss,Boss,manager,,north\nann,Ann,sales,boss,east\n",
	}
	for name, o := range obs {
		files[name+"_stub.lua"] = exprRule(name+"_stub", fmt.Sprintf(`(function(p) %s end)(people.get("ann"))`, o.body))
		files[name+"_full.lua"] = exprRule(name+"_full", fmt.Sprintf(`(function(p) %s end)((function() local q = people.get("ann") local _ = q.name return q end)())`, o.body))
	}
	s := load(t, newDir(t, files))
	for _, st := range s.Status() {
		require.Empty(t, st.Error, st.File)
	}
	slot := mustTime(t, "2026-12-01T09:00:00+08:00")
	for name, o := range obs {
		for _, v := range []string{"_stub", "_full"} {
			t.Run(name+v, func(t *testing.T) {
				out, err := s.Plan(context.Background(), name+v, engine.RunContext{Key: "k", Slot: slot.UTC()})
				require.NoError(t, err)
				require.Len(t, out, 1)
				require.Equal(t, o.want, content(t, out[0].Payload))
			})
		}
	}
}

// TestPersonStubsPlan: recipients returned as people get their messages
// with the directory's fields and `missed`, and the state goes back to
// its pool holding no stub.
func TestPersonStubsPlan(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{
		"people.csv": "userid,name,roles\nann,Ann,sales\nbob,Bob,sales\ncy,Cy,ops\n",
		"r.lua": `return rule {
  name = "r", channel = "mock",
  recipients = function(run) return people.where { role = "sales" } end,
  message = function(run, to) return { content = to.name .. #to.missed .. json.encode(to.roles) } end,
}`,
	}))
	out, err := s.Plan(context.Background(), "r", engine.RunContext{Key: "k", Slot: mustTime(t, "2026-12-01T09:00:00Z"),
		Missed: map[string][]string{"bob": {"r@earlier"}}})
	require.NoError(t, err)
	require.Len(t, out, 2)
	require.Equal(t, `Ann0["sales"]`, content(t, out[0].Payload))
	require.Equal(t, `Bob1["sales"]`, content(t, out[1].Payload))
	v := s.cur.Load()
	v.pool.mu.Lock()
	defer v.pool.mu.Unlock()
	require.NotEmpty(t, v.pool.idle)
	for _, sb := range v.pool.idle {
		require.Nil(t, sb.stubs, "a pooled state keeps the last run's stubs")
	}
}

// TestPersonStubsOverflow: past maxStubs, the registry forgets the stubs
// the run has dropped (they were kept alive, and filled, only for being
// registered: people.all() in every message of a run of 600 held 360,000
// and filled 262,144 of them), and keeps the few it still holds as stubs
// that fill as before.
func TestPersonStubsOverflow(t *testing.T) {
	t.Parallel()
	sb := newSandbox(&env{calendars: calendar.NewRegistry(), logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer sb.L.Close()
	p := newInterner().person(&personFields{UserID: "ann", Name: "Ann"})
	kept := sb.personTable(p)
	dropped := weak.Make(sb.personTable(p))
	for range maxStubs - 2 {
		sb.personTable(p)
	}
	last := sb.personTable(p) // the registry is full: this one sweeps it
	require.Nil(t, dropped.Value(), "a dropped stub is still held")
	require.Len(t, sb.stubs, 2, "the registry holds dropped stubs")
	for _, st := range []*lua.LTable{kept, last} {
		require.Equal(t, sb.personMeta, st.Metatable, "a held stub was filled")
		require.Equal(t, lua.LString("Ann"), sb.filled(st).RawGetString(fieldName))
	}
}

// TestPersonStubsOverflowHeld: stubs the run still holds past maxStubs
// stay stubs (filling them cost 1.7 KB each where a stub and its entry
// cost about 0.13 KB: people.all() for 300,000 people took 500 MB more),
// and the next sweep waits until the registry has doubled.
func TestPersonStubsOverflowHeld(t *testing.T) {
	t.Parallel()
	sb := newSandbox(&env{calendars: calendar.NewRegistry(), logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer sb.L.Close()
	p := newInterner().person(&personFields{UserID: "ann", Name: "Ann"})
	held := make([]*lua.LTable, 0, maxStubs+1)
	for range maxStubs + 1 {
		held = append(held, sb.personTable(p))
	}
	require.Len(t, sb.stubs, maxStubs+1)
	require.Equal(t, 2*maxStubs, sb.sweepAt)
	for _, st := range []*lua.LTable{held[0], held[maxStubs-1], held[maxStubs]} {
		require.Equal(t, sb.personMeta, st.Metatable, "a held stub was filled")
		require.Equal(t, lua.LString("Ann"), sb.filled(st).RawGetString(fieldName))
	}
}

// TestPersonStubsDeepest: the deepest value a people file may hold (the
// refused one is in TestPeopleErrors) fills a stub and becomes JSON, for
// people returned as people and as userids.
func TestPersonStubsDeepest(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", maxDepth-1) + "1" + strings.Repeat("]", maxDepth-1)
	msg := `message = function(run, to) return { content = json.encode(to.x):sub(1, 3) .. to.name } end }`
	s := load(t, newDir(t, map[string]string{
		"people.json": `[{"userid": "ann", "name": "Ann", "x": ` + deep + `}]`,
		"a.lua":       `return rule { name = "a", channel = "mock", recipients = function() return people.all() end, ` + msg,
		"b.lua":       `return rule { name = "b", channel = "mock", recipients = function() return { "ann" } end, ` + msg,
	}))
	for _, st := range s.Status() {
		require.Empty(t, st.Error, st.File)
	}
	for _, r := range []string{"a", "b"} {
		out, err := s.Plan(context.Background(), r, engine.RunContext{Key: "k", Slot: mustTime(t, "2026-12-01T09:00:00Z")})
		require.NoError(t, err, r)
		require.Len(t, out, 1)
		require.Equal(t, "[[[Ann", content(t, out[0].Payload))
	}
}

// TestPersonStubsAsRuleFields: a person where the rule table expects a
// table of its own (the rule itself, stagger, quiet_hours, digest) is read
// as the full person: the same error whether or not the rule read it first.
func TestPersonStubsAsRuleFields(t *testing.T) {
	t.Parallel()
	files := map[string]string{"people.csv": "userid,name\nann,Ann\n"}
	want := map[string]string{
		"whole":   `unknown field "userid"`,
		"stagger": `stagger: unknown field "userid"`,
		"quiet":   `quiet_hours: unknown field "userid"`,
		"digest":  `digest: unknown field "userid"`,
	}
	field := map[string]string{"stagger": "stagger", "quiet": "quiet_hours", "digest": "digest"}
	for name := range want {
		for v, p := range map[string]string{
			"_stub": `people.get("ann")`,
			"_full": `(function() local q = people.get("ann") local _ = q.name return q end)()`,
		} {
			src := `return rule(` + p + `)`
			if name != "whole" {
				src = `return rule { name = "` + name + v + `", channel = "mock", recipients = function() return {} end,
  message = function() return { content = "x" } end, ` + field[name] + ` = ` + p + ` }`
			}
			files[name+v+".lua"] = src
		}
	}
	s := load(t, newDir(t, files))
	got := map[string]string{}
	for _, st := range s.Status() {
		got[st.File] = st.Error
	}
	for name, w := range want {
		for _, v := range []string{"_stub", "_full"} {
			require.Contains(t, got[name+v+".lua"], w, name+v)
		}
	}
}

// TestPersonStubsAsMetatable: a person used as another table's metatable
// is read raw by the VM (metamethods are looked up without __index), so
// it is filled when it is set: a people file's column named like a
// metamethod acts as it would on the full person.
func TestPersonStubsAsMetatable(t *testing.T) {
	t.Parallel()
	files := map[string]string{"people.csv": "userid,name,__index\nann,Ann,v\n"}
	for v, p := range map[string]string{
		"stub": `people.get("ann")`,
		"full": `(function() local q = people.get("ann") local _ = q.name return q end)()`,
	} {
		// __index = "v" (a string) makes x.upper the string library's upper.
		files[v+".lua"] = exprRule(v, `type(setmetatable({}, `+p+`).upper)`)
	}
	s := load(t, newDir(t, files))
	for _, v := range []string{"stub", "full"} {
		out, err := s.Plan(context.Background(), v, engine.RunContext{Key: "k", Slot: mustTime(t, "2026-12-01T09:00:00Z")})
		require.NoError(t, err, v)
		require.Len(t, out, 1)
		require.Equal(t, "function", content(t, out[0].Payload), v)
	}
}
