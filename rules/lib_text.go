package rules

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The `text` module: text.render("Hi {{name}}, {{to.department}}", tbl)
// replaces each {{path}} with the value at that dotted path of tbl (a
// missing value renders as nothing). It is deliberately tiny: rules that
// need logic write it in Lua.
func (sb *sandbox) openText() {
	sb.register("text", map[string]lua.LGFunction{
		"render": sb.textRender,
	})
}

func (sb *sandbox) textRender(L *lua.LState) int {
	tpl := L.CheckString(1)
	var data *lua.LTable
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		data = L.CheckTable(2)
	}
	if len(tpl) > maxStringLen {
		sb.errorf("text.render", "template of %d bytes is over the %d byte limit", len(tpl), maxStringLen)
	}
	var b strings.Builder
	rest := tpl
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			b.WriteString(rest)
			break
		}
		j := strings.Index(rest[i+2:], "}}")
		if j < 0 {
			sb.errorf("text.render", "unclosed {{ at byte %d", len(tpl)-len(rest)+i)
		}
		b.WriteString(rest[:i])
		b.WriteString(luaString(sb.lookupPath(data, strings.TrimSpace(rest[i+2:i+2+j]))))
		if b.Len() > maxStringLen {
			sb.errorf("text.render", "result is over the %d byte limit", maxStringLen)
		}
		rest = rest[i+2+j+2:]
	}
	L.Push(lua.LString(b.String()))
	return 1
}

// lookupPath follows a dotted path ("to.name", "items.1") through tables.
func (sb *sandbox) lookupPath(t *lua.LTable, path string) lua.LValue {
	var cur lua.LValue = lua.LNil
	if t != nil {
		cur = t
	}
	for _, part := range strings.Split(path, ".") {
		tbl, ok := cur.(*lua.LTable)
		if !ok {
			return lua.LNil
		}
		cur = sb.filled(tbl).RawGetString(part)
		if cur == lua.LNil {
			if n, ok := atoiSmall(part); ok {
				cur = tbl.RawGetInt(n)
			}
		}
	}
	return cur
}

func atoiSmall(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
