package rules

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine/calendar"
)

// TestGsubSameAsGopherLua: the sandbox's string.gsub gives what
// gopher-lua's own gives, quirks included.
func TestGsubSameAsGopherLua(t *testing.T) {
	t.Parallel()
	cases := []string{
		`("hello world"):gsub("o", "0")`,
		`("hello world"):gsub("o", "0", 1)`,
		`("hello world"):gsub("o", "0", 0)`,
		`("abc"):gsub("%w", "%0%0")`,
		`("abc"):gsub("(b)", "[%1]")`,
		`("abc"):gsub("b", "[%1]")`,
		`("abc"):gsub("b", "%%")`,
		`("abc"):gsub("b", "x%")`,
		`("abc"):gsub("b", "%x")`,
		`("abc"):gsub("b", "%%%0%%")`,
		`("abc"):gsub("", "-")`,
		`("abc"):gsub("^a", "A")`,
		`("abc"):gsub("()b()", "%1%2")`,
		`("a=1, b=2"):gsub("(%w+)=(%w+)", "%2=%1")`,
		`("$name is $age"):gsub("%$(%w+)", { name = "Ann", age = 30 })`,
		`("$name is $x"):gsub("%$(%w+)", { name = "Ann", x = false })`,
		`("abc"):gsub("%w", { a = {} })`,
		`("abc"):gsub("()b", { [2] = "B" })`,
		`("abc"):gsub("%w", function(c) if c == "b" then return nil end return c:upper() end)`,
		`("a1b2"):gsub("(%a)(%d)", function(a, d) return d .. a end)`,
		`("abc"):gsub("()", function(p) return p end)`,
		`("abc"):gsub("b", function() return 42 end)`,
		`("héllo"):gsub("l+", "L")`,
		`(""):gsub("", "x")`,
		`(""):gsub("a", "x")`,
	}
	plain := lua.NewState()
	defer plain.Close()
	sb := newSandbox(&env{calendars: calendar.NewRegistry(), logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer sb.L.Close()
	run := func(L *lua.LState, expr string) string {
		fn, err := L.LoadString(`local s, n = ` + expr + ` return tostring(s) .. "|" .. tostring(n)`)
		require.NoError(t, err, expr)
		if err := L.CallByParam(lua.P{Fn: fn, NRet: 1, Protect: true}); err != nil {
			return "error"
		}
		defer L.Pop(1)
		return L.Get(-1).String()
	}
	for _, expr := range cases {
		require.Equal(t, run(plain, expr), run(sb.L, expr), expr)
	}
	for _, expr := range []string{`("abc"):gsub("b", "%2")`, `("abc"):gsub("(", "x")`} {
		require.Equal(t, "error", run(sb.L, expr), expr)
	}
}

// TestGsubBounded: a match per byte of a large subject is linear work (it
// was a copy of the whole result per match: minutes inside one Go call,
// where the time limit cannot interrupt), and table and function
// replacements are bound by the size limit like string ones.
func TestGsubBounded(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ expr, want string }{
		"per_byte":     {`#(string.rep("x", 300000):gsub("x", "y")) .. ""`, "300000"},
		"function":     {`#(string.rep("x", 20):gsub("x", function() return string.rep("y", 2^20) end)) .. ""`, "string.gsub: result is over"},
		"table":        {`#(string.rep("x", 20):gsub("x", { x = string.rep("y", 2^20) })) .. ""`, "string.gsub: result is over"},
		"string":       {`#(string.rep("x", 1000):gsub("x", string.rep("y", 100000))) .. ""`, "string.gsub: result is over"},
		"string_refs":  {`#(("(" .. string.rep("x", 2^19-2) .. ")"):gsub("%b()", "%0%0%0")) .. ""`, "string.gsub: result is over"},
		"ok_at_limit":  {`#(("(" .. string.rep("x", 2^19-2) .. ")"):gsub("%b()", "%0%0")) .. ""`, "1048576"},
		"unmatched_ok": {`#(string.rep("x", 2^20):gsub("y", function() return "z" end)) .. ""`, "1048576"},
	}
	files := map[string]string{}
	for name, c := range cases {
		files[name+".lua"] = exprRule(name, c.expr)
	}
	s := load(t, newDir(t, files), func(c *Config) { c.CallTimeout = 30 * time.Second }) // quadratic was minutes; load must not fail it
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := plan(t, s, name, "")
			if strings.Contains(c.want, "over") {
				require.ErrorContains(t, err, c.want)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, content(t, out[0].Payload))
		})
	}
}
