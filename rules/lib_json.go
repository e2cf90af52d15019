package rules

import (
	"bytes"
	"encoding/json"

	lua "github.com/yuin/gopher-lua"
)

// jsonNull is the value behind json.null: a table field set to it is
// written as null (a nil field would simply be absent).
type jsonNull struct{}

// The `json` module: encode (sorted keys, so the bytes are the same on
// every leader), decode, and null.
func (sb *sandbox) openJSON() {
	mod := sb.register("json", map[string]lua.LGFunction{
		"encode": sb.jsonEncode,
		"decode": sb.jsonDecode,
	})
	null := sb.L.NewUserData()
	null.Value = jsonNull{}
	mt := sb.L.NewTable()
	mt.RawSetString("__metatable", lua.LString(lockedMeta))
	mt.RawSetString("__tostring", sb.L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LString("null"))
		return 1
	}))
	sb.L.SetMetatable(null, mt)
	sb.null = null
	mod.RawSetString("null", null)
}

func (sb *sandbox) jsonEncode(L *lua.LState) int {
	v, err := sb.toGo(L.CheckAny(1), maxStringLen)
	if err != nil {
		sb.errorf("json.encode", "%v", err)
	}
	b, err := encodeJSON(v)
	if err != nil {
		sb.errorf("json.encode", "%v", err)
	}
	if len(b) > maxStringLen {
		sb.errorf("json.encode", "result of %d bytes is over the %d byte limit", len(b), maxStringLen)
	}
	L.Push(lua.LString(b))
	return 1
}

func (sb *sandbox) jsonDecode(L *lua.LState) int {
	s := L.CheckString(1)
	if len(s) > maxStringLen {
		sb.errorf("json.decode", "input of %d bytes is over the %d byte limit", len(s), maxStringLen)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	if err := dec.Decode(&v); err != nil {
		L.Push(lua.LNil)
		L.Push(lua.LString("json.decode: " + err.Error()))
		return 2
	}
	L.Push(sb.fromGo(v, 0))
	return 1
}
