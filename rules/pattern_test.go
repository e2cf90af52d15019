package rules

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine/calendar"
)

// TestPatternFunctionsSameAsGopherLua: the sandbox's find, match and
// gmatch give what gopher-lua's own give.
func TestPatternFunctionsSameAsGopherLua(t *testing.T) {
	t.Parallel()
	cases := []string{
		`("hello world"):find("o w")`,
		`("hello world"):find("o", 6)`,
		`("hello world"):find("o", -3)`,
		`("hello world"):find("l+")`,
		`("hello world"):find("(l+)(o)")`,
		`("hello world"):find("()ll()")`,
		`("hello world"):find(".", 1, true)`,
		`("a.b"):find(".", 2, true)`,
		`("hello"):find("")`,
		`("hello"):find("^h")`,
		`("hello"):find("^e")`,
		`("hello"):find("o$")`,
		`("hello"):find("xyz")`,
		`("key = value"):match("(%w+)%s*=%s*(%w+)")`,
		`("2026-12-01"):match("^(%d+)-(%d+)-(%d+)$")`,
		`("hello"):match("l+")`,
		`("hello"):match("l", -2)`,
		`("hello"):match("()l")`,
		`("f(a(b)c)d"):match("%b()")`,
		`("abcabc"):match("(a)(b)c%1")`,
		`("THE (quick) fox"):find("%f[%a]%a+")`,
	}
	gmatch := []string{
		`("one two  three"):gmatch("%a+")`,
		`("a=1, b=2"):gmatch("(%w+)=(%w+)")`,
		`("abc"):gmatch("")`,
		`("abc"):gmatch("^a")`,
		`("héllo"):gmatch(".")`,
	}
	plain := lua.NewState()
	defer plain.Close()
	sb := newSandbox(&env{calendars: calendar.NewRegistry(), logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer sb.L.Close()
	run := func(L *lua.LState, src string) string {
		fn, err := L.LoadString(src)
		require.NoError(t, err, src)
		if err := L.CallByParam(lua.P{Fn: fn, NRet: 1, Protect: true}); err != nil {
			return "error"
		}
		defer L.Pop(1)
		return L.Get(-1).String()
	}
	for _, expr := range cases {
		src := `local t = { ` + expr + ` } local out = {} for i = 1, 6 do out[i] = tostring(t[i]) end return table.concat(out, "|")`
		require.Equal(t, run(plain, src), run(sb.L, src), expr)
	}
	for _, expr := range gmatch {
		src := `local out = {} for a, b in ` + expr + ` do out[#out + 1] = tostring(a) .. "," .. tostring(b) end return table.concat(out, "|")`
		require.Equal(t, run(plain, src), run(sb.L, src), expr)
	}
	for _, expr := range []string{`("abc"):find("(")`, `("abc"):match("[a")`, `("abc"):gmatch("[a")`} {
		require.Equal(t, "error", run(sb.L, `return tostring(`+expr+`)`), expr)
	}
}

// TestBacktrackingPatternStopped: a pattern that backtracks for years
// over a long subject runs inside one Go call; the time limit stops it
// there (it used to run on, its state abandoned by the watchdog), in each
// pattern function and at load time.
func TestBacktrackingPatternStopped(t *testing.T) {
	t.Parallel()
	subject := `string.rep("a", 2^16)`
	pattern := `".-.-.-.-b"`
	s := load(t, newDir(t, map[string]string{
		"find.lua":   simpleRule("find", subject+`:find(`+pattern+`) return {}`),
		"match.lua":  simpleRule("match", subject+`:match(`+pattern+`) return {}`),
		"gmatch.lua": simpleRule("gmatch", `for x in `+subject+`:gmatch(`+pattern+`) do end return {}`),
		"gsub.lua":   simpleRule("gsub", subject+`:gsub(`+pattern+`, "") return {}`),
		"load.lua":   `local _ = ` + subject + `:find(` + pattern + `)` + "\n" + simpleRule("load", `return {}`),
	}), func(c *Config) { c.CallTimeout = 200 * time.Millisecond })
	st, _ := statusOf(s, "load.lua")
	require.Contains(t, st.Error, "stopped after 200ms")
	require.Equal(t, 1, st.Line)
	for _, r := range []string{"find", "match", "gmatch", "gsub"} {
		start := time.Now()
		_, err := plan(t, s, r, "")
		require.ErrorIs(t, err, ErrTimeout, r)
		require.Contains(t, err.Error(), r+".lua:")
		require.Contains(t, err.Error(), "stopped after 200ms", r)
		require.Less(t, time.Since(start), 5*time.Second, r)
	}
}

// TestGreedyPatternDepthBounded: a greedy repetition over a long subject
// is refused past the matcher's depth (gopher-lua's went 1,000,000 deep: a
// 384 MiB goroutine stack for a 1 MiB subject), and works on a shorter
// one.
func TestGreedyPatternDepthBounded(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{
		"long.lua":  exprRule("long", `#(string.rep("x", 2^18):match(".*")) .. ""`),
		"short.lua": exprRule("short", `#(string.rep("x", 50000):match(".*")) .. ""`),
	}), func(c *Config) { c.CallTimeout = 20 * time.Second })
	_, err := plan(t, s, "long", "")
	require.ErrorContains(t, err, "pattern/input too complex")
	out, err := plan(t, s, "short", "")
	require.NoError(t, err)
	require.Equal(t, "50000", content(t, out[0].Payload))
}
