package rules

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"
)

// TestSandboxRefuses runs code a rule must not be able to run, each in its
// own rule of one set, and checks that each is refused or stopped and that
// the set keeps serving a good rule afterwards.
func TestSandboxRefuses(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		body string
		want string // substring of the error
	}{
		"os_execute":      {`os.execute("touch /tmp/herald-pwned")`, "os"},
		"io_open":         {`io.open("/etc/passwd")`, "io"},
		"require":         {`require("os")`, "require"},
		"load":            {`load("return 1")()`, "load"},
		"loadstring":      {`loadstring("return 1")()`, "loadstring"},
		"dofile":          {`dofile("/etc/passwd")`, "dofile"},
		"debug":           {`debug.getinfo(1)`, "debug"},
		"package":         {`package.loadlib("x", "y")`, "package"},
		"getfenv":         {`getfenv(1)`, "getfenv"},
		"rawset":          {`rawset(string, "x", 1)`, "rawset"},
		"string_rep":      {`return { string.rep("x", 1e10) }`, "string.rep"},
		"string_rep_meth": {`local s = ("ab"):rep(1e9) return { s }`, "string.rep"},
		"format_width":    {`return { string.format("%99999999d", 1) }`, "string.format"},
		"gsub_blowup":     {`local s = string.rep("x", 1000) return { s:gsub("x", string.rep("y", 100000)) }`, "string.gsub"},
		"lib_write":       {`string.upper = nil`, "library"},
		"metatable":       {`setmetatable(string, {})`, "protected"},
		"random":          {`return { tostring(math.random()) }`, "random"},
		"recursion":       {`local function f(n) return f(n + 1) + 1 end return { f(1) }`, "stack overflow"},
		"many_values":     {`return { string.byte(string.rep("x", 200000), 1, -1) }`, "registry overflow"},
		"coroutine":       {`coroutine.create(function() end)`, "coroutine"},
		// Lua 5.1 grows the list up to the position: 50 million slots (800 MB)
		// from one call, stuck in Go where the time limit cannot reach it.
		// %q writes a control byte as \ddd: four bytes for one.
		"format_q":   {`return { string.format("%q", string.rep("\0", 500000)) }`, "string.format"},
		"insert_far": {`local t = {} table.insert(t, 50000000, "x") return t`, "table.insert"},
	}
	files := map[string]string{"good.lua": simpleRule("good", `return { "alice" }`)}
	for name, c := range cases {
		files[name+".lua"] = simpleRule(name, c.body)
	}
	// A generous time limit: these must fail by refusal, not by time,
	// even on a loaded machine under -race.
	s := load(t, newDir(t, files), func(c *Config) { c.CallTimeout = 10 * time.Second })
	for _, st := range s.Status() {
		require.Empty(t, st.Error, st.File)
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := plan(t, s, name, "")
			require.Error(t, err)
			require.ErrorIs(t, err, ErrRule)
			require.Contains(t, err.Error(), c.want)
			require.Contains(t, err.Error(), name+".lua:")
			out, err := plan(t, s, "good", "")
			require.NoError(t, err)
			require.Len(t, out, 1)
		})
	}
}

func TestSandboxStopsInfiniteLoop(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{
		"loop.lua": simpleRule("loop", `while true do end`),
		"good.lua": simpleRule("good", `return { "alice" }`),
	}), func(c *Config) { c.CallTimeout = 100 * time.Millisecond })
	start := time.Now()
	_, err := plan(t, s, "loop", "")
	require.ErrorIs(t, err, ErrTimeout)
	require.Contains(t, err.Error(), "loop.lua:")
	require.Less(t, time.Since(start), 2*time.Second)
	// pcall cannot swallow the interrupt.
	start = time.Now()
	s2 := load(t, newDir(t, map[string]string{
		"loop.lua": simpleRule("loop", `while true do pcall(function() while true do end end) end`),
	}), func(c *Config) { c.CallTimeout = 100 * time.Millisecond })
	_, err = plan(t, s2, "loop", "")
	require.ErrorIs(t, err, ErrTimeout)
	require.Less(t, time.Since(start), 2*time.Second)
	out, err := plan(t, s, "good", "")
	require.NoError(t, err)
	require.Len(t, out, 1)
}

func TestSandboxCallerContext(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{"loop.lua": simpleRule("loop", `while true do end`)}),
		func(c *Config) { c.CallTimeout = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := s.Plan(ctx, "loop", runAt(time.Now()))
	require.ErrorIs(t, err, ErrTimeout)
}

// TestSandboxStuckInGo checks the watchdog: a call stuck inside a Go
// function, where Lua's interrupt cannot reach, still returns to the
// caller in time, and its state is never reused.
func TestSandboxStuckInGo(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	cfg := func(c *Config) { c.CallTimeout = 50 * time.Millisecond }
	s := load(t, newDir(t, map[string]string{"good.lua": simpleRule("good", `return { "alice" }`)}), cfg)
	s.testHook = func(sb *sandbox) {
		sb.base.RawSetString("block", sb.L.NewFunction(func(L *lua.LState) int { <-release; return 0 }))
	}
	writeFiles(t, s.cfg.Dir, map[string]string{"stuck.lua": simpleRule("stuck", `block() return {}`)})
	_, err := s.Reload()
	require.NoError(t, err)
	start := time.Now()
	_, err = plan(t, s, "stuck", "")
	require.ErrorIs(t, err, ErrTimeout)
	require.Less(t, time.Since(start), 2*time.Second)
	close(release) // lets the abandoned goroutine finish (goleak)
	out, err := plan(t, s, "good", "")
	require.NoError(t, err)
	require.Len(t, out, 1)
}

// TestRunsDoNotLeak checks that globals and top-level locals a run changes
// are gone for the next run on the same pooled state.
func TestRunsDoNotLeak(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{"count.lua": `
local n = 0
return rule {
  name = "count", channel = "mock",
  recipients = function(run)
    n = n + 1
    counter = (counter or 0) + 1
    return { "u" .. n .. "-" .. counter }
  end,
  message = function(run, to) return { content = to.userid } end,
}`}), func(c *Config) { c.PoolSize = 1 })
	for range 3 {
		out, err := plan(t, s, "count", "")
		require.NoError(t, err)
		require.Equal(t, "u1-1", out[0].Recipient)
	}
}

func TestLoadTimeLoopIsFileError(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{
		"loop.lua": "while true do end\n" + simpleRule("loop", `return {}`),
		"good.lua": simpleRule("good", `return { "alice" }`),
	}), func(c *Config) { c.CallTimeout = 50 * time.Millisecond })
	st, ok := statusOf(s, "loop.lua")
	require.True(t, ok)
	require.Contains(t, st.Error, "stopped after")
	require.Equal(t, 1, st.Line)
	require.Len(t, s.Rules(), 1)
}

func TestErrorIsRuleError(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{"bad.lua": simpleRule("bad", `error("no customers")`)}))
	_, err := plan(t, s, "bad", "")
	var re *RuleError
	require.True(t, errors.As(err, &re))
	require.Equal(t, "bad.lua", re.File)
	require.Equal(t, 5, re.Line)
	require.Contains(t, re.Msg, "no customers")
}

// poisonThenCheck runs rule poison (whose error, if any, is ignored) and
// then rule victim on the same pooled state, and returns victim's message:
// nothing poison did may show in it.
func poisonThenCheck(t *testing.T, poison, victim string) string {
	t.Helper()
	s := load(t, newDir(t, map[string]string{
		"poison.lua": exprRule("poison", poison),
		"victim.lua": exprRule("victim", victim),
	}), func(c *Config) { c.PoolSize = 1 })
	for _, st := range s.Status() {
		require.Empty(t, st.Error, st.File)
	}
	_, _ = plan(t, s, "poison", "")
	out, err := plan(t, s, "victim", "")
	require.NoError(t, err)
	require.Len(t, out, 1)
	return content(t, out[0].Payload)
}

// TestStringLibraryNotReachable: the string library behind the read-only
// `string` table and the strings' metatable must not be reachable through
// an __index field, or a run could replace string functions for every
// later run on its pooled state.
func TestStringLibraryNotReachable(t *testing.T) {
	t.Parallel()
	for name, poison := range map[string]string{
		"module":    `(function() string.__index.upper = function() return "pwned" end end)()`,
		"metatable": `(function() ("").__index.upper = function() return "pwned" end end)()`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := poisonThenCheck(t, poison, `string.upper("a") .. ("b"):upper() .. ("c"):rep(2) .. tostring(getmetatable(""))`)
			require.Equal(t, "ABcc"+lockedMeta, got)
		})
	}
}

// TestSetmetatableOnlyOnTables: gopher-lua lets setmetatable give numbers,
// booleans or functions a metatable, which is one per state for the whole
// type: it would change tostring(42) for every later run on that state.
// As in Lua 5.1, only tables take a metatable.
func TestSetmetatableOnlyOnTables(t *testing.T) {
	t.Parallel()
	got := poisonThenCheck(t, `(function()
      local mt = { __tostring = function() return "pwned" end, __index = function() return "pwned" end }
      for _, v in ipairs({ 1, true, print or tostring }) do pcall(setmetatable, v, mt) end
      return setmetatable({}, mt)
    end)() and "ok"`,
		`tostring(42) .. tostring(true) .. tostring(getmetatable(1)) .. tostring(getmetatable(tostring)) .. tostring(setmetatable({}, { __index = { x = "x" } }).x)`)
	require.Equal(t, "42truenilnilx", got)
}

// TestTableConcatBounded: table.concat is held to the size limit like the
// string helpers (twenty empty strings joined by a 1 MiB separator were
// 19 MiB, a thousand 1 GiB).
func TestTableConcatBounded(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ expr, want string }{
		"separator": {`(function() local t = {} for i = 1, 20 do t[i] = "" end return #table.concat(t, string.rep("x", 2^20)) .. "" end)()`, "table.concat"},
		"values":    {`(function() local t = {} for i = 1, 20 do t[i] = string.rep("x", 2^19) end return #table.concat(t) .. "" end)()`, "table.concat"},
		"range":     {`(function() local t = {} for i = 1, 20 do t[i] = string.rep("x", 2^19) end return #table.concat(t, "", 3, 4) .. "" end)()`, "1048576"},
		"numbers":   {`table.concat({ 1, 2.5, "x" }, ", ")`, "1, 2.5, x"},
		"bad_value": {`table.concat({ 1, {}, 3 })`, "invalid value"},
	}
	files := map[string]string{}
	for name, c := range cases {
		files[name+".lua"] = exprRule(name, c.expr)
	}
	s := load(t, newDir(t, files), func(c *Config) { c.CallTimeout = 5 * time.Second })
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := plan(t, s, name, "")
			if name == "range" || name == "numbers" {
				require.NoError(t, err)
				require.Equal(t, c.want, content(t, out[0].Payload))
				return
			}
			require.ErrorContains(t, err, c.want)
		})
	}
}

// TestFormatTableArgument: string.format hands its arguments to Go's fmt,
// which prints a table given to %d or %#v by reflection, every string in
// it in full: twenty 1 MiB strings made 20 MiB past the size check. A
// table, function or time argument is formatted as its string form.
func TestFormatTableArgument(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{"r.lua": exprRule("r", `(function()
      local t = {}
      for i = 1, 20 do t[i] = string.rep("y", 2^20) end
      local out = {}
      for _, f in ipairs({ "%d", "%#v", "%v", "%s", "%x" }) do
        local s = string.format(f, t)
        out[#out + 1] = #s < 100 and "short" or ("long " .. #s)
      end
      out[#out + 1] = string.format("%s|%d|%5.1f", time.parse("2026-12-01T09:00:00+08:00"), 42, 2.25)
      return table.concat(out, ",")
    end)()`)}), func(c *Config) { c.CallTimeout = 5 * time.Second })
	out, err := plan(t, s, "r", "")
	require.NoError(t, err)
	require.Equal(t, "short,short,short,short,short,2026-12-01T09:00:00+08:00|42|  2.2", content(t, out[0].Payload))
}

// TestLoadStuckInGo: a file whose top level is stuck inside a Go function
// at load (where Lua's interrupt cannot reach) must not hold up the load:
// the file is reported as timed out, the others load, and reloads go on.
func TestLoadStuckInGo(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // lets the abandoned goroutine finish (goleak)
	s := load(t, newDir(t, map[string]string{"good.lua": simpleRule("good", `return { "alice" }`)}),
		func(c *Config) { c.CallTimeout = 50 * time.Millisecond })
	s.testHook = func(sb *sandbox) {
		sb.base.RawSetString("block", sb.L.NewFunction(func(L *lua.LState) int { <-release; return 0 }))
	}
	writeFiles(t, s.cfg.Dir, map[string]string{
		"stuck.lua": "block()\n" + simpleRule("stuck", `return {}`),
		"zz.lua":    simpleRule("zz", `return { "bob" }`),
	})
	done := make(chan error, 1)
	go func() { _, err := s.Reload(); done <- err }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(waitTimeout):
		t.Fatal("a reload waits for a file stuck in a Go function")
	}
	st, ok := statusOf(s, "stuck.lua")
	require.True(t, ok)
	require.Contains(t, st.Error, "stuck")
	out, err := plan(t, s, "zz", "")
	require.NoError(t, err)
	require.Len(t, out, 1)
}

// TestRuntimeErrorMessage: a rule's error becomes a run's error, which is
// replicated through the Raft log and kept with the run: a huge message is
// cut, and a message of several lines keeps its file and line.
func TestRuntimeErrorMessage(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{
		"huge.lua":  simpleRule("huge", `error(string.rep("x", 2^20))`),
		"lines.lua": simpleRule("lines", `error("no customers\nfor today")`),
	}), func(c *Config) {
		// What is checked is the message; building a 1 MiB string under
		// -race on a loaded machine can take longer than load's 300 ms.
		c.CallTimeout = 5 * time.Second
	})
	_, err := plan(t, s, "huge", "")
	require.ErrorIs(t, err, ErrRule)
	require.Less(t, len(err.Error()), 5<<10)
	require.True(t, strings.HasPrefix(err.Error(), "huge.lua:5: xxxx"), err.Error()[:40])
	require.True(t, strings.HasSuffix(err.Error(), "xxx…"))
	_, err = plan(t, s, "lines", "")
	var re *RuleError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "lines.lua", re.File)
	require.Equal(t, 5, re.Line)
	require.Equal(t, "no customers\nfor today", re.Msg)
}
