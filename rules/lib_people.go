package rules

import (
	"slices"

	lua "github.com/yuin/gopher-lua"

	"github.com/heraldhq/herald/engine/calendar"
)

// The `people` module: the directory read from the people file next to the
// rules. Every call returns fresh tables, so a rule that changes a person's
// table changes nothing for the next call or the next run.
func (sb *sandbox) openPeople() {
	sb.register("people", map[string]lua.LGFunction{
		"all":          sb.peopleAll,
		"get":          sb.peopleGet,
		"where":        sb.peopleWhere,
		"manager_of":   sb.peopleManagerOf,
		"birthdays_on": sb.peopleBirthdaysOn,
		"count":        sb.peopleCount,
		"in_tag":       sb.peopleInTag,
	})
}

// dir is the directory the call sees: the run's own (a run started with
// an earlier directory snapshot), else the version's.
func (sb *sandbox) dir() *Directory {
	if sb.run != nil && sb.run.people != nil {
		return sb.run.people
	}
	return sb.env.people
}

func (sb *sandbox) people() []*Person {
	if d := sb.dir(); d != nil {
		return d.people
	}
	return nil
}

func (sb *sandbox) list(ps []*Person) *lua.LTable {
	t := sb.L.CreateTable(len(ps), 0)
	for _, p := range ps {
		t.Append(sb.personTable(p))
	}
	return t
}

func (sb *sandbox) peopleAll(L *lua.LState) int {
	L.Push(sb.list(sb.people()))
	return 1
}

func (sb *sandbox) peopleCount(L *lua.LState) int {
	L.Push(lua.LNumber(len(sb.people())))
	return 1
}

func (sb *sandbox) peopleGet(L *lua.LState) int {
	id := L.CheckString(1)
	if p, ok := sb.dir().Get(id); ok {
		L.Push(sb.personTable(p))
	} else {
		L.Push(lua.LNil)
	}
	return 1
}

func (sb *sandbox) peopleManagerOf(L *lua.LState) int {
	var id string
	switch v := L.CheckAny(1).(type) {
	case lua.LString:
		id = string(v)
	case *lua.LTable:
		id = sb.userid(v)
	default:
		sb.errorf("people.manager_of", "want a userid or a person, got %s", v.Type())
	}
	p, ok := sb.dir().Get(id)
	if ok && p.Manager != "" {
		if m, ok := sb.dir().Get(p.Manager); ok {
			L.Push(sb.personTable(m))
			return 1
		}
	}
	L.Push(lua.LNil)
	return 1
}

// peopleWhere selects people matching every condition: role = "sales"
// (one of their roles), or any field = value; a list of values matches any
// of them. An unknown field is an error rather than an empty result, so a
// typo does not silently send to nobody.
func (sb *sandbox) peopleWhere(L *lua.LState) int {
	cond := sb.filled(L.CheckTable(1))
	type clause struct {
		field string
		any   map[string]bool // a set: a long list costs one lookup per person
	}
	var clauses []clause
	eachPair(cond, func(k, v lua.LValue) bool {
		field, ok := k.(lua.LString)
		if !ok {
			sb.errorf("people.where", "want field = value pairs, got a %s key", k.Type())
		}
		f := string(field)
		switch f {
		case "role":
			f = fieldRoles
		case "tag":
			f = fieldTags
		case fieldDepartments:
			f = fieldDepartment // any of them, as department does
		}
		if !slices.Contains(knownPersonFields, f) && (sb.dir() == nil || !sb.dir().extra[f]) {
			sb.errorf("people.where", "unknown field %q (fields: role, %v, and the people file's columns)", string(field), knownPersonFields)
		}
		c := clause{field: f, any: map[string]bool{}}
		switch v := v.(type) {
		case *lua.LTable: // a person given as a value is its values, stub or not
			sb.filled(v).ForEach(func(_, x lua.LValue) { c.any[luaString(x)] = true })
		default:
			c.any[luaString(v)] = true
		}
		clauses = append(clauses, c)
		return true
	})
	slices.SortFunc(clauses, func(a, b clause) int { // evaluation order must not depend on table order
		if a.field < b.field {
			return -1
		}
		if a.field > b.field {
			return 1
		}
		return 0
	})
	var out []*Person
	for _, p := range sb.people() {
		match := true
		for _, c := range clauses {
			if !personHas(p, c.field, c.any) {
				match = false
				break
			}
		}
		if match {
			out = append(out, p)
		}
	}
	L.Push(sb.list(out))
	return 1
}

func personHas(p *Person, field string, want map[string]bool) bool {
	var have []string
	switch field {
	case fieldRoles:
		have = p.Roles
	case fieldUserID:
		have = []string{p.UserID}
	case fieldName:
		have = []string{p.Name}
	case fieldDepartment:
		have = p.Departments
	case fieldTags:
		have = p.Tags
	case fieldManager:
		have = []string{p.Manager}
	case fieldBirthday:
		have = []string{p.Birthday}
	case fieldLunarBirthday:
		have = []string{p.LunarBirthday}
	case fieldTimezone:
		have = []string{p.Timezone}
	default:
		v, _ := p.Extra(field)
		switch v := v.(type) {
		case nil:
		case []any:
			for _, x := range v {
				have = append(have, anyString(x))
			}
		default:
			have = []string{anyString(v)}
		}
	}
	for _, h := range have {
		if want[h] {
			return true
		}
	}
	return false
}

func anyString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return luaString(lua.LNumber(v))
	case bool:
		if v {
			return "true"
		}
		return "false"
	}
	return ""
}

// peopleInTag lists the people who carry a tag (WeCom tag members, the
// members of tagged departments, or a people file's tags column), in
// directory order. A tag nobody carries is an empty list, not an error:
// tags come and go in WeCom without the rules changing.
func (sb *sandbox) peopleInTag(L *lua.LState) int {
	tag := L.CheckString(1)
	var out []*Person
	for _, p := range sb.people() {
		if slices.Contains(p.Tags, tag) {
			out = append(out, p)
		}
	}
	L.Push(sb.list(out))
	return 1
}

// peopleBirthdaysOn lists the people greeted on a date (see birthday.go for
// the policy); each has birthday_kind = "solar" or "lunar".
func (sb *sandbox) peopleBirthdaysOn(L *lua.LState) int {
	d := sb.checkDate(1, "people.birthdays_on")
	lun := calendar.LunarOf(d)
	t := L.NewTable()
	for _, p := range sb.people() {
		if kind, ok := birthdayOn(p, d, lun); ok {
			pt := sb.filled(sb.personTable(p))
			pt.RawSetString(fieldBirthdayKind, lua.LString(kind))
			t.Append(pt)
		}
	}
	L.Push(t)
	return 1
}
