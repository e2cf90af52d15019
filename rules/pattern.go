package rules

import (
	"context"
	"errors"
	"strings"
	"unsafe"

	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/rules/internal/luapattern"
)

// string.find, string.match and string.gmatch with gopher-lua's semantics,
// on the forked matcher (rules/internal/luapattern) that checks the call's
// context as it works: gopher-lua's own run a backtracking pattern to the
// end inside one Go call, where neither the time limit nor the memory
// limit reaches. gmatch is lazy here, as in Lua (gopher-lua's finds every
// match before the first iteration: a match object per byte of a 1 MiB
// subject).

// callContext is the context of the call running on L, checked by the
// matcher.
func callContext(L *lua.LState) context.Context {
	if ctx := L.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// subjectBytes reads s without copying: the matcher only reads it.
func subjectBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// patternError raises a matcher error; a stopped match raises the
// context's error, which call reports as the time or memory limit.
func patternError(L *lua.LState, err error) {
	var stopped *luapattern.Stopped
	if errors.As(err, &stopped) {
		L.RaiseError("%s", stopped.Error())
	}
	L.RaiseError("%s", err.Error())
}

func strFind(L *lua.LState) int {
	checkSubject("find")(L)
	str, pat := L.CheckString(1), L.CheckString(2)
	if pat == "" {
		L.Push(lua.LNumber(1))
		L.Push(lua.LNumber(0))
		return 2
	}
	init := startIndex(str, L.OptInt(3, 1))
	if init > len(str) {
		L.Push(lua.LNil)
		return 1
	}
	if L.GetTop() == 4 && lua.LVAsBool(L.Get(4)) { // plain
		pos := strings.Index(str[init:], pat)
		if pos < 0 {
			L.Push(lua.LNil)
			return 1
		}
		L.Push(lua.LNumber(init + pos + 1))
		L.Push(lua.LNumber(init + pos + len(pat)))
		return 2
	}
	mds, err := luapattern.Find(callContext(L), pat, subjectBytes(str), init, 1)
	if err != nil {
		patternError(L, err)
	}
	if len(mds) == 0 {
		L.Push(lua.LNil)
		return 1
	}
	md := mds[0]
	L.Push(lua.LNumber(md.Capture(0) + 1))
	L.Push(lua.LNumber(md.Capture(1)))
	return 2 + pushCaptures(L, str, md)
}

func strMatch(L *lua.LState) int {
	checkSubject("match")(L)
	str, pat := L.CheckString(1), L.CheckString(2)
	init := startIndex(str, L.OptInt(3, 1))
	if init > len(str) {
		L.Push(lua.LNil)
		return 1
	}
	mds, err := luapattern.Find(callContext(L), pat, subjectBytes(str), init, 1)
	if err != nil {
		patternError(L, err)
	}
	if len(mds) == 0 {
		L.Push(lua.LNil)
		return 1
	}
	return pushMatch(L, str, mds[0])
}

// strGmatch returns an iterator that finds one match per call.
func strGmatch(L *lua.LState) int {
	checkSubject("gmatch")(L)
	str, p := L.CheckString(1), L.CheckString(2)
	pat, err := luapattern.Compile(p)
	if err != nil {
		patternError(L, err)
	}
	sp := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		for sp <= len(str) {
			md, next, ok, err := pat.Match(callContext(L), subjectBytes(str), sp)
			if err != nil {
				patternError(L, err)
			}
			if pat.MustHead { // gopher-lua tries a ^ pattern once
				sp = len(str) + 1
			} else if ok {
				sp = next
			} else {
				sp++
			}
			if ok {
				return pushMatch(L, str, md)
			}
		}
		return 0
	}))
	return 1
}

// startIndex is a Lua init argument (1-based, negative from the end) as a
// byte offset, not below 0.
func startIndex(str string, i int) int {
	if i > 0 {
		return i - 1
	}
	if i < 0 {
		return max(0, len(str)+i)
	}
	return 0
}

// pushMatch pushes what match and gmatch return: the captures, or the
// whole match when there are none.
func pushMatch(L *lua.LState, str string, md *luapattern.MatchData) int {
	if md.CaptureLength() == 2 {
		L.Push(lua.LString(str[md.Capture(0):md.Capture(1)]))
		return 1
	}
	return pushCaptures(L, str, md)
}

// pushCaptures pushes a match's captures (a position capture as a number).
func pushCaptures(L *lua.LState, str string, md *luapattern.MatchData) int {
	n := 0
	for i := 2; i < md.CaptureLength(); i += 2 {
		if md.IsPosCapture(i) {
			L.Push(lua.LNumber(md.Capture(i)))
		} else {
			L.Push(lua.LString(str[md.Capture(i):md.Capture(i+1)]))
		}
		n++
	}
	return n
}
