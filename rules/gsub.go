package rules

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/rules/internal/luapattern"
)

// strGsub is string.gsub with gopher-lua's semantics but linear work and a
// bounded result. gopher-lua's own copies the whole result once per match
// (a 1 MiB subject with a match per byte is hours of copying inside one Go
// call, which the time limit cannot interrupt), and checks no size for a
// table or function replacement (twenty matches of a 1 MiB value are 20
// MiB). Here the result is written once, left to right, and refused as
// soon as it passes maxStringLen.
func strGsub(L *lua.LState) int {
	checkSubject("gsub")(L)
	str := L.CheckString(1)
	pat := L.CheckString(2)
	L.CheckTypes(3, lua.LTString, lua.LTTable, lua.LTFunction)
	repl := L.Get(3)
	limit := L.OptInt(4, -1)
	mds, err := luapattern.Find(callContext(L), pat, subjectBytes(str), 0, limit)
	if err != nil {
		patternError(L, err)
	}
	if len(mds) == 0 {
		L.SetTop(1)
		L.Push(lua.LNumber(0))
		return 2
	}
	var b strings.Builder
	prev := 0
	for _, m := range mds {
		start, end := m.Capture(0), m.Capture(1)
		r, ok := gsubReplacement(L, str, repl, m)
		if !ok {
			continue // false or nil: the match stays as it was
		}
		if b.Len()+(start-prev)+len(r) > maxStringLen {
			L.RaiseError("string.gsub: result is over the %d byte limit", maxStringLen)
		}
		b.WriteString(str[prev:start])
		b.WriteString(r)
		prev = end
	}
	if b.Len()+len(str)-prev > maxStringLen {
		L.RaiseError("string.gsub: result is over the %d byte limit", maxStringLen)
	}
	b.WriteString(str[prev:])
	L.Push(lua.LString(b.String()))
	L.Push(lua.LNumber(len(mds)))
	return 2
}

// gsubReplacement is what one match becomes, as gopher-lua computes it:
// %0..%9 in a string (a "%" before anything else is kept with it), the
// table's value at the first capture, or the function's result.
func gsubReplacement(L *lua.LState, str string, repl lua.LValue, m *luapattern.MatchData) (string, bool) {
	switch repl := repl.(type) {
	case lua.LString:
		r := string(repl)
		var b strings.Builder
		for i := 0; i < len(r); i++ {
			c := r[i]
			switch {
			case c != '%' || i == len(r)-1:
				b.WriteByte(c)
			case r[i+1] == '%':
				b.WriteByte('%')
				i++
			case r[i+1] >= '0' && r[i+1] <= '9':
				b.WriteString(gsubCapture(L, m, str, 2*int(r[i+1]-'0')))
				i++
			default:
				b.WriteByte('%')
				b.WriteByte(r[i+1])
				i++
			}
			if b.Len() > maxStringLen {
				L.RaiseError("string.gsub: result is over the %d byte limit", maxStringLen)
			}
		}
		return b.String(), true
	case *lua.LTable:
		idx := 0
		if m.CaptureLength() > 2 {
			idx = 2
		}
		var v lua.LValue
		if m.IsPosCapture(idx) {
			v = L.GetTable(repl, lua.LNumber(m.Capture(idx)))
		} else {
			v = L.GetField(repl, str[m.Capture(idx):m.Capture(idx+1)])
		}
		return lua.LVAsString(v), !lua.LVIsFalse(v)
	case *lua.LFunction:
		L.Push(repl)
		nargs := 0
		if m.CaptureLength() > 2 {
			for i := 2; i < m.CaptureLength(); i += 2 {
				if m.IsPosCapture(i) {
					L.Push(lua.LNumber(m.Capture(i)))
				} else {
					L.Push(lua.LString(gsubCapture(L, m, str, i)))
				}
				nargs++
			}
		} else {
			L.Push(lua.LString(gsubCapture(L, m, str, 0)))
			nargs++
		}
		L.Call(nargs, 1)
		v := L.Get(-1)
		L.Pop(1)
		return lua.LVAsString(v), !lua.LVIsFalse(v)
	}
	return "", false
}

// gsubCapture is capture idx (an even index into the match's captures) of
// m; %1 without captures is the whole match.
func gsubCapture(L *lua.LState, m *luapattern.MatchData, str string, idx int) string {
	if idx > 2 && idx >= m.CaptureLength() {
		L.RaiseError("invalid capture index")
	}
	if idx >= m.CaptureLength() && idx == 2 {
		idx = 0
	}
	if m.IsPosCapture(idx) {
		return fmt.Sprint(m.Capture(idx))
	}
	return str[m.Capture(idx):m.Capture(idx+1)]
}
