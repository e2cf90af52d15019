package rules

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine/calendar"
)

// Limits every state and every Go helper enforces. gopher-lua has no
// allocation limit of its own, so the helpers that could build a large
// value from a small one (string.rep, string.format, string.gsub,
// table.concat, text, json) check the size before they allocate.
const (
	maxStringLen  = 1 << 20  // largest string a helper builds or scans
	maxDepth      = 64       // nesting of tables converted to JSON or back
	maxPayload    = 64 << 10 // one message's JSON
	maxRecipients = 1_000_000
	callStackSize = 200       // Lua call frames: deep recursion stops here
	registrySize  = 4 << 10   // initial value stack
	registryMax   = 128 << 10 // value stack ceiling: unpack of a huge table stops here
	registryGrow  = 32 << 10  // value stack growth step
	maxFormatPad  = 99        // widest %N / %.N that string.format accepts, as in C Lua
	lockedMeta    = "locked"  // what getmetatable shows for protected tables
	timeTypeName  = "herald.time"
	nullTypeName  = "herald.json.null"
	ruleFuncName  = "rule"
)

// removedGlobals are base functions a rule must not reach: loading code,
// touching the file system, the garbage collector, other functions'
// environments, raw writes that would bypass read-only library tables, and
// printing to the node's stdout (rules log with `log`).
var removedGlobals = []string{
	"dofile", "loadfile", "load", "loadstring", "require", "module",
	"collectgarbage", "getfenv", "setfenv", "rawset", "print", "_printregs",
	"newproxy", "_G", "_GOPHER_LUA_VERSION",
}

// env is what a version's states share: the people directory, the
// calendars, the logger and the memory limit of a call. It is immutable
// once built.
type env struct {
	people      *Directory
	calendars   *calendar.Registry
	logger      *slog.Logger
	memoryLimit uint64 // Config.memoryLimitFor the version's people; 0 (a test's bare env): DefaultMemoryLimit
}

// runState is what the library functions need to know of the run being
// evaluated; nil while a file's top level runs at load time.
type runState struct {
	rule     string
	file     string
	calendar string
	zone     *time.Location
	slot     time.Time
	// submit is set only while on_failed runs: task.submit refuses
	// everywhere else.
	submit *submitter
	// people, when set, is the directory of the run's own snapshot
	// (Set.Plan), in place of the version's.
	people *Directory
}

// sandbox is one Lua state with Herald's library. It is used by one
// goroutine at a time (the pool hands it out).
type sandbox struct {
	// people, when set by Set.Plan, is the directory the next run sees.
	nextPeople *Directory
	L          *lua.LState
	env        *env
	base       *lua.LTable // the globals every run's environment reads through
	run        *runState
	null       lua.LValue // json.null

	// personMeta and stubs are the person stubs' metatable and whose
	// each stub is (see person_table.go).
	personMeta *lua.LTable
	stubs      map[*lua.LTable]*Person
	sweepAt    int // registry size of the next sweep (0: maxStubs)

	// logLines counts the log lines of the current run (reset by
	// evalFile, which starts every run and every load of a file).
	logLines int
	// broken marks a state whose call was interrupted: it is not reused.
	broken bool
	// deadline is when the current call must end (Unix ns, 0 outside a
	// call); the watchdog in Set.withSandbox reads it from another goroutine.
	deadline atomic.Int64
}

// newSandbox builds a state with only the safe parts of the standard library
// and Herald's own modules.
func newSandbox(e *env) *sandbox {
	L := lua.NewState(lua.Options{
		SkipOpenLibs:        true,
		CallStackSize:       callStackSize,
		RegistrySize:        registrySize,
		RegistryMaxSize:     registryMax,
		RegistryGrowStep:    registryGrow,
		MinimizeStackMemory: true,
	})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	sb := &sandbox{L: L, env: e, base: L.G.Global}
	for _, name := range removedGlobals {
		sb.base.RawSetString(name, lua.LNil)
	}
	sb.capStringLib()
	if mod, ok := sb.base.RawGetString("table").(*lua.LTable); ok {
		mod.RawSetString("concat", wrapGo(L, mod, "concat", checkConcat))
		mod.RawSetString("insert", wrapGo(L, mod, "insert", checkInsert))
	}
	// gopher-lua's setmetatable also takes numbers, booleans and
	// functions, whose metatable is one per state for the whole type: a
	// run could change tostring(42) for every later run. Lua 5.1 takes
	// tables only.
	// Both tables are filled if they are person stubs: the VM reads a
	// metatable raw, without its __index.
	sb.base.RawSetString("setmetatable", wrapGo(L, sb.base, "setmetatable", func(L *lua.LState) {
		sb.filled(L.CheckTable(1))
		if mt, ok := L.Get(2).(*lua.LTable); ok {
			sb.filled(mt)
		}
	}))
	sb.openPersonStubs()
	// Rules run on every leader and must plan the same messages: no
	// randomness.
	if m, ok := sb.base.RawGetString("math").(*lua.LTable); ok {
		m.RawSetString("random", lua.LNil)
		m.RawSetString("randomseed", lua.LNil)
	}
	sb.openTime()
	sb.openJSON()
	sb.openText()
	sb.openLog()
	sb.openCalendar()
	sb.openPeople()
	sb.openTask()
	sb.base.RawSetString(ruleFuncName, L.NewFunction(luaRule))
	for _, name := range []string{"string", "table", "math", "time", "json", "text", "log", "calendar", "people", "task"} {
		if t, ok := sb.base.RawGetString(name).(*lua.LTable); ok {
			sb.base.RawSetString(name, readonly(L, t))
		}
	}
	// Strings' own metatable reads the library through the read-only
	// proxy too: gopher-lua makes the module its own metatable (with
	// __index = itself), which would hand out the writable table as
	// ("").__index and string.__index.
	strMeta := L.NewTable()
	strMeta.RawSetString("__index", sb.base.RawGetString("string"))
	strMeta.RawSetString("__metatable", lua.LString(lockedMeta))
	L.SetMetatable(lua.LString(""), strMeta)
	return sb
}

// luaRule is the `rule { ... }` a file returns: it only checks that it got
// a table; the fields are checked in Go, where the file's lines are known.
func luaRule(L *lua.LState) int {
	L.Push(L.CheckTable(1))
	return 1
}

// readonly wraps t so that rules can read a library but not change it for
// the runs that later reuse this pooled state.
func readonly(L *lua.LState, t *lua.LTable) *lua.LTable {
	proxy := L.NewTable()
	mt := L.NewTable()
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("cannot change a library table (field %q)", L.CheckAny(2).String())
		return 0
	}))
	mt.RawSetString("__metatable", lua.LString(lockedMeta))
	L.SetMetatable(proxy, mt)
	return proxy
}

// runEnv is a fresh global environment for one run: globals a rule sets
// live only as long as the run, and the shared ones are reached through it.
func (sb *sandbox) runEnv() *lua.LTable {
	e := sb.L.NewTable()
	mt := sb.L.NewTable()
	mt.RawSetString("__index", sb.base)
	mt.RawSetString("__metatable", lua.LString(lockedMeta))
	sb.L.SetMetatable(e, mt)
	return e
}

// capStringLib replaces the string functions that can allocate or scan
// without bound. Strings' metatable reads this table, so method calls
// ("x"):rep(n) get the capped versions too.
func (sb *sandbox) capStringLib() {
	L := sb.L
	mod, ok := sb.base.RawGetString("string").(*lua.LTable)
	if !ok {
		return
	}
	mod.RawSetString("dump", lua.LNil)
	mod.RawSetString("__index", lua.LNil) // strings get their own metatable (newSandbox)
	mod.RawSetString("rep", L.NewFunction(strRep))
	mod.RawSetString("format", wrapGo(L, mod, "format", checkFormat))
	mod.RawSetString("gsub", L.NewFunction(strGsub))
	mod.RawSetString("find", L.NewFunction(strFind))
	mod.RawSetString("match", L.NewFunction(strMatch))
	gm := L.NewFunction(strGmatch)
	mod.RawSetString("gmatch", gm)
	mod.RawSetString("gfind", gm)
}

// wrapGo runs check on the arguments, then the library's own function.
func wrapGo(L *lua.LState, mod *lua.LTable, name string, check func(*lua.LState)) *lua.LFunction {
	orig, ok := mod.RawGetString(name).(*lua.LFunction)
	if !ok || !orig.IsG {
		panic("rules: " + name + " is not a Go function") // gopher-lua changed shape
	}
	return L.NewFunction(func(L *lua.LState) int {
		check(L)
		return orig.GFunction(L)
	})
}

func strRep(L *lua.LState) int {
	s := L.CheckString(1)
	n := L.CheckInt(2)
	if n <= 0 || s == "" {
		L.Push(lua.LString(""))
		return 1
	}
	if n > maxStringLen/len(s) {
		L.RaiseError("string.rep: %d × %d bytes is over the %d byte limit", n, len(s), maxStringLen)
	}
	L.Push(lua.LString(strings.Repeat(s, n)))
	return 1
}

// checkConcat refuses a table.concat whose result would be over the
// limit, counting as gopher-lua does: t[i..j], clamped to 1..#t, with the
// separator between them.
func checkConcat(L *lua.LState) {
	t := L.CheckTable(1)
	sep := len(L.OptString(2, ""))
	n := t.Len()
	i, j := max(L.OptInt(3, 1), 1), min(L.OptInt(4, n), n)
	size := 0
	for k := i; k <= j; k++ {
		if s, ok := t.RawGetInt(k).(lua.LString); ok {
			size += len(s)
		} else {
			size++ // a number is at least a digit; anything else is refused by concat itself
		}
		if k < j {
			size += sep
		}
		if size > maxStringLen {
			L.RaiseError("table.concat: result is over the %d byte limit", maxStringLen)
		}
	}
}

// checkInsert refuses a position past the end of the list, as Lua 5.3
// does: Lua 5.1 (and gopher-lua) grows the list up to it, so
// table.insert(t, 50000000, x) fills 50 million slots in one Go call.
func checkInsert(L *lua.LState) {
	t := L.CheckTable(1)
	if L.GetTop() != 3 {
		return
	}
	if pos, n := L.CheckInt(2), t.Len(); pos < 1 || pos > n+1 {
		L.RaiseError("table.insert: position %d is out of bounds (1..%d)", pos, n+1)
	}
}

func checkSubject(name string) func(*lua.LState) {
	return func(L *lua.LState) {
		if s := L.CheckString(1); len(s) > maxStringLen {
			L.RaiseError("string.%s: subject of %d bytes is over the %d byte limit", name, len(s), maxStringLen)
		}
		if p := L.CheckString(2); len(p) > maxStringLen {
			L.RaiseError("string.%s: pattern of %d bytes is over the %d byte limit", name, len(p), maxStringLen)
		}
	}
}

// checkFormat refuses widths and precisions over two digits (C Lua's own
// rule), and a result that would be over the limit. Tables, functions and
// userdata are formatted as their string form.
func checkFormat(L *lua.LState) {
	f := L.CheckString(1)
	size := len(f)
	grow := 1 // what one byte of a string argument may become
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		j, digits := i+1, 0
		for ; j < len(f) && strings.IndexByte("-+ #0123456789.", f[j]) >= 0; j++ {
			if f[j] >= '0' && f[j] <= '9' {
				digits++
				if digits > 2 {
					L.RaiseError("string.format: width or precision over %d in %q", maxFormatPad, f)
				}
			} else {
				digits = 0
			}
		}
		if j < len(f) && f[j] == 'q' {
			grow = 4 // %q writes a control byte as \ddd
		}
		size += maxFormatPad
		i = j
	}
	for i := 2; i <= L.GetTop(); i++ {
		switch v := L.Get(i).(type) {
		case lua.LString:
			size += grow * len(v)
		case lua.LNumber, lua.LBool, *lua.LNilType:
			size += 32
		default:
			// Go's fmt would print a table given to %d or %#v by
			// reflection, every string in it in full: give it the
			// value's string form (a time's is RFC 3339).
			s := luaString(v)
			L.Replace(i, lua.LString(s))
			size += len(s)
		}
	}
	if size > maxStringLen {
		L.RaiseError("string.format: result could be %d bytes, over the %d byte limit", size, maxStringLen)
	}
}

// needRun returns the run being evaluated, or raises an error when a
// function that depends on it is called from a file's top level.
func (sb *sandbox) needRun(fn string) *runState {
	if sb.run == nil {
		sb.L.RaiseError("%s is only available inside rule functions", fn)
	}
	return sb.run
}

// register adds a module of Go functions as a global table.
func (sb *sandbox) register(name string, funcs map[string]lua.LGFunction) *lua.LTable {
	t := sb.L.NewTable()
	for n, f := range funcs {
		t.RawSetString(n, sb.L.NewFunction(f))
	}
	sb.base.RawSetString(name, t)
	return t
}

// errorf raises a Lua error from a helper with the helper's name.
func (sb *sandbox) errorf(fn, format string, args ...any) {
	sb.L.RaiseError("%s: %s", fn, fmt.Sprintf(format, args...))
}
