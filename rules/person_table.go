package rules

import (
	"cmp"
	"runtime"
	"slices"
	"unsafe"
	"weak"

	lua "github.com/yuin/gopher-lua"
)

// A person is handed to a rule as a stub: an empty table whose metatable
// fills it in place, with the directory's fields, the first time anything
// reads or writes it (an index, an assignment, pairs or next, rawget,
// get/setmetatable, or Go code reading a table a rule gave, which calls
// sb.filled). From then on it is an ordinary table without a metatable,
// exactly what it would have been if built full; the only field a stub
// answers without filling is userid.
//
// Why: gopher-lua keeps an insertion-order index beside each table's map,
// so a full person costs about 1.7 KB and a stub about 0.1 KB with its
// entry below. A rule whose recipients are `people.all()` for 100,000
// people kept 100,000 full tables at once; now it holds stubs, and Plan
// fills each one just before its message and drops it after, so a run
// holds its people as stubs and one person at a time in full.
//
// A stub's identity (whose fields fill it) is kept here, beside the Lua
// state, because an empty table has nowhere to keep it that a rule could
// not see. The registry lives for one use of the state (pool.put drops
// it: nothing of a run outlives it). It holds its stubs, so a run that
// makes many and drops them (people.all() in every message) would keep
// them all alive: at maxStubs it forgets those the run no longer holds
// (sweepStubs), and the next sweep waits until the registry has doubled
// from what was still referenced. Stubs still referenced stay stubs: filling them
// would cost 1.7 KB each and free only their 0.13 KB.
const maxStubs = 1 << 18

// personTable is person p as a rule sees it (a stub; see above).
func (sb *sandbox) personTable(p *Person) *lua.LTable {
	if len(sb.stubs) >= max(sb.sweepAt, maxStubs) {
		sb.sweepStubs()
	}
	if sb.stubs == nil {
		sb.stubs = make(map[*lua.LTable]*Person)
	}
	t := sb.L.CreateTable(0, 0)
	t.Metatable = sb.personMeta
	sb.stubs[t] = p
	return t
}

// sweepStubs drops from the registry the stubs nothing else holds: it
// holds the rest weakly while a collection runs, then strongly again.
// Which stubs survive is invisible to rules (a stub and its filled table
// look alike), so leaders that collect differently still plan the same.
// The forced collection runs at most once per maxStubs stubs made, and
// once per doubling of those referenced.
func (sb *sandbox) sweepStubs() {
	type weakStub struct {
		t weak.Pointer[lua.LTable]
		p *Person
	}
	stubs := make([]*lua.LTable, 0, len(sb.stubs))
	for t := range sb.stubs {
		stubs = append(stubs, t)
	}
	// The runtime keeps a span's weak handles in a list sorted by address:
	// made from the highest address down, each goes in at the head (made
	// in map order, each walked half the list: most of a sweep's time).
	slices.SortFunc(stubs, func(a, b *lua.LTable) int {
		return cmp.Compare(uintptr(unsafe.Pointer(b)), uintptr(unsafe.Pointer(a)))
	})
	all := make([]weakStub, len(stubs))
	for i, t := range stubs {
		all[i] = weakStub{weak.Make(t), sb.stubs[t]}
	}
	clear(stubs) // referenced weakly from here on
	sb.stubs = nil
	runtime.GC() // clears the weak pointers of the stubs the run dropped
	live := make(map[*lua.LTable]*Person)
	for _, h := range all {
		if t := h.t.Value(); t != nil {
			live[t] = h.p
		}
	}
	sb.stubs = live
	sb.sweepAt = 2 * len(live)
}

// filled fills t in place if it is a person stub, and returns it. Go code
// that reads the fields of a table a rule gave calls it first.
func (sb *sandbox) filled(t *lua.LTable) *lua.LTable {
	p, ok := sb.stubs[t]
	if !ok {
		return t
	}
	delete(sb.stubs, t)
	t.Metatable = lua.LNil
	sb.fillPerson(t, p)
	return t
}

// userid is the userid of a person table a rule gave ("" if it has none
// that is a string).
func (sb *sandbox) userid(t *lua.LTable) string {
	if p, ok := sb.stubs[t]; ok {
		return p.UserID
	}
	id, _ := t.RawGetString(fieldUserID).(lua.LString)
	return string(id)
}

// fillPerson sets p's fields on t: userid and the directory's fields
// (absent when empty), roles, departments and tags as lists, extra columns
// as given. A key t already holds is kept.
func (sb *sandbox) fillPerson(t *lua.LTable, p *Person) {
	L := sb.L
	fields := [...]struct{ k, v string }{
		{fieldName, p.Name}, {fieldDepartment, p.Department}, {fieldManager, p.Manager},
		{fieldBirthday, p.Birthday}, {fieldLunarBirthday, p.LunarBirthday}, {fieldTimezone, p.Timezone},
	}
	if k, _ := t.Next(lua.LNil); k == lua.LNil {
		// An untouched stub (the usual case) takes the contents of a table
		// sized for the person (userid, the fields set, three lists, the
		// extras and `missed`, which a run adds), so its map is not grown
		// and copied key by key: a run fills one per recipient. Copying
		// an LTable is safe: it holds only references, and full is not
		// used again.
		size := 1 + 3 + len(p.extras) + 1
		for _, kv := range fields {
			if kv.v != "" {
				size++
			}
		}
		full := L.CreateTable(0, size)
		*t = *full
	}
	set := func(k string, v lua.LValue) {
		if t.RawGetString(k) == lua.LNil {
			t.RawSetString(k, v)
		}
	}
	set(fieldUserID, lua.LString(p.UserID))
	for _, kv := range fields {
		if kv.v != "" {
			set(kv.k, lua.LString(kv.v))
		}
	}
	for _, l := range [...]struct {
		k string
		v []string
	}{{fieldRoles, p.Roles}, {fieldDepartments, p.Departments}, {fieldTags, p.Tags}} {
		lt := L.CreateTable(len(l.v), 0)
		for _, x := range l.v {
			lt.Append(lua.LString(x))
		}
		set(l.k, lt)
	}
	for _, x := range p.extras {
		set(x.key, sb.fromGo(x.value, 1))
	}
}

// openPersonStubs makes the stubs' metatable and the base functions that
// see a table's raw contents fill a stub first, so that no rule can tell
// a stub from the table it stands for.
func (sb *sandbox) openPersonStubs() {
	L := sb.L
	mt := L.NewTable()
	mt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		t, k := L.CheckTable(1), L.CheckAny(2)
		if p, ok := sb.stubs[t]; ok && k == lua.LString(fieldUserID) {
			L.Push(lua.LString(p.UserID))
			return 1
		}
		L.Push(sb.filled(t).RawGet(k))
		return 1
	}))
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		t := L.CheckTable(1)
		L.RawSet(sb.filled(t), L.CheckAny(2), L.Get(3))
		return 0
	}))
	sb.personMeta = mt

	fillFirst := func(L *lua.LState) {
		if t, ok := L.Get(1).(*lua.LTable); ok {
			sb.filled(t)
		}
	}
	for _, name := range []string{"next", "rawget", "getmetatable"} {
		sb.base.RawSetString(name, wrapGo(L, sb.base, name, fillFirst))
	}
	// pairs returns the iterator from its upvalue, which a wrapper does not
	// have: keep the iterator and return it ourselves. The iterator fills
	// too: a rule can keep it (`local it = pairs({})`) and walk a stub
	// with it, as it could with next.
	L.Push(sb.base.RawGetString("pairs"))
	L.Push(L.NewTable())
	L.Call(1, 1)
	aux, ok := L.Get(-1).(*lua.LFunction)
	L.Pop(1)
	if !ok || !aux.IsG {
		panic("rules: pairs' iterator is not a Go function") // gopher-lua changed shape
	}
	iter := L.NewFunction(func(L *lua.LState) int {
		fillFirst(L)
		return aux.GFunction(L)
	})
	sb.base.RawSetString("pairs", L.NewFunction(func(L *lua.LState) int {
		t := L.CheckTable(1)
		sb.filled(t)
		L.Push(iter)
		L.Push(t)
		L.Push(lua.LNil)
		return 3
	}))
}
