package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// ErrValue is wrapped by errors converting a Lua value that has no JSON
// form (a function, a cycle, NaN, a table nested too deeply).
var ErrValue = errors.New("value has no JSON form")

// toGo converts a Lua value to plain Go values that encoding/json writes
// deterministically (maps are written with sorted keys). A table whose keys
// are exactly 1..n is an array; any other table is an object with string
// keys; an empty table is an empty object.
//
// limit bounds the JSON the value would become. A table can hold the same
// table many times (t = {t, t} forty times over is 2^40 values built in
// forty steps), so the conversion counts, as it goes, at least the bytes
// each value will take, and stops once that passes limit.
func (sb *sandbox) toGo(v lua.LValue, limit int) (any, error) {
	c := &jsonConv{left: limit, limit: limit, filled: sb.filled}
	return c.conv(v, 0)
}

// jsonConv is one conversion: the bytes of JSON it may still produce, and
// the sandbox's filled, which fills a person stub before it is read.
type jsonConv struct {
	left, limit int
	filled      func(*lua.LTable) *lua.LTable
}

// spend counts n bytes of output.
func (c *jsonConv) spend(n int) error {
	if c.left -= n; c.left < 0 {
		return fmt.Errorf("its JSON is over the %d byte limit", c.limit)
	}
	return nil
}

func (c *jsonConv) conv(v lua.LValue, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: nested more than %d deep (a cycle?)", ErrValue, maxDepth)
	}
	switch v := v.(type) {
	case *lua.LNilType:
		return nil, c.spend(len("null"))
	case lua.LBool:
		return bool(v), c.spend(len("true"))
	case lua.LNumber:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%w: %v", ErrValue, f)
		}
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int64(f), c.spend(1)
		}
		return f, c.spend(1)
	case lua.LString:
		return string(v), c.spend(len(v) + 2)
	case *lua.LUserData:
		switch x := v.Value.(type) {
		case time.Time:
			s := x.Format(time.RFC3339)
			return s, c.spend(len(s) + 2)
		case jsonNull:
			return nil, c.spend(len("null"))
		}
		return nil, fmt.Errorf("%w: userdata", ErrValue)
	case *lua.LTable:
		if err := c.spend(2); err != nil { // the brackets
			return nil, err
		}
		return c.table(c.filled(v), depth)
	}
	return nil, fmt.Errorf("%w: %s", ErrValue, v.Type())
}

// eachPair calls f for each pair of t in the order pairs() gives them
// (the array part, then the other keys in the order they were added),
// until f returns false. LTable.ForEach walks Go maps, whose order differs
// from run to run; what a rule's tables become must not.
func eachPair(t *lua.LTable, f func(k, v lua.LValue) bool) {
	for k, v := t.Next(lua.LNil); k != lua.LNil; k, v = t.Next(k) {
		if !f(k, v) {
			return
		}
	}
}

func (c *jsonConv) table(t *lua.LTable, depth int) (any, error) {
	n, isArray := 0, true
	var err error
	eachPair(t, func(k, _ lua.LValue) bool {
		n++
		if kn, ok := k.(lua.LNumber); !ok || float64(kn) != math.Trunc(float64(kn)) || kn < 1 {
			isArray = false
		}
		return true
	})
	if isArray && n > 0 && t.Len() == n {
		arr := make([]any, 0, n)
		for i := 1; i <= n && err == nil; i++ {
			var x any
			if i > 1 {
				err = c.spend(1) // the comma
			}
			if err == nil {
				x, err = c.conv(t.RawGetInt(i), depth+1)
			}
			arr = append(arr, x)
		}
		return arr, err
	}
	obj := make(map[string]any, n)
	eachPair(t, func(k, v lua.LValue) bool {
		var key string
		switch k := k.(type) {
		case lua.LString:
			key = string(k)
		case lua.LNumber:
			key = k.String()
		default:
			err = fmt.Errorf("%w: a %s key", ErrValue, k.Type())
			return false
		}
		if _, dup := obj[key]; dup { // 1.5 and "1.5": one JSON key
			err = fmt.Errorf("key %q is both a number and a string", key)
			return false
		}
		if err = c.spend(len(key) + 3 + min(len(obj), 1)); err != nil { // "key": and a comma after the first
			return false
		}
		var x any
		if x, err = c.conv(v, depth+1); err != nil {
			return false
		}
		obj[key] = x
		return true
	})
	return obj, err
}

// encodeJSON writes v with sorted keys and without HTML escaping, so that
// every leader produces the same bytes and markdown keeps its < and &.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// fromGo converts decoded JSON (or directory values) to Lua values. Arrays
// become 1-based tables; null becomes nil.
func (sb *sandbox) fromGo(v any, depth int) lua.LValue {
	L := sb.L
	if depth > maxDepth {
		L.RaiseError("value nested more than %d deep", maxDepth)
	}
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case json.Number:
		f, _ := v.Float64()
		return lua.LNumber(f)
	case time.Time:
		return sb.timeValue(v)
	case []string:
		t := L.CreateTable(len(v), 0)
		for _, x := range v {
			t.Append(lua.LString(x))
		}
		return t
	case []any:
		t := L.CreateTable(len(v), 0)
		for i, x := range v {
			t.RawSetInt(i+1, sb.fromGo(x, depth+1))
		}
		return t
	case map[string]any:
		t := L.CreateTable(0, len(v))
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys) // a stable table layout keeps pairs() order stable too
		for _, k := range keys {
			t.RawSetString(k, sb.fromGo(v[k], depth+1))
		}
		return t
	}
	return lua.LString(fmt.Sprint(v))
}

// luaString is how text.render and log show a value: strings as they are,
// whole numbers without a fraction.
func luaString(v lua.LValue) string {
	switch v := v.(type) {
	case *lua.LNilType:
		return ""
	case lua.LString:
		return string(v)
	case lua.LNumber:
		f := float64(v)
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return strconv.FormatInt(int64(f), 10)
		}
		return strconv.FormatFloat(f, 'g', 14, 64)
	case *lua.LUserData:
		if t, ok := v.Value.(time.Time); ok {
			return t.Format(time.RFC3339)
		}
	}
	return v.String()
}
