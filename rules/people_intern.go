package rules

import (
	"encoding/json"
	"strconv"
	"strings"
)

// interner shares what many people of one people file hold alike: their
// role, department and tag lists (a thousand salespeople hold one
// ["sales"]) and the text of other columns (a region, a level). A
// person's lists and values are never changed after parsing (rules get
// copies as Lua tables), so sharing them is invisible. It lives for one
// parse.
//
// Whatever it keeps is a copy: a CSV reader's fields are slices of the
// row's one string, and a person holding any of them kept the whole row
// alive (72 MB of rows on every node at a million people).
type interner struct {
	lists     map[string][]string
	values    map[string]any    // a string and its one boxed copy
	texts     map[string]string // the person fields many people share alike
	profiles  map[string]*profile
	birthdays map[string]*birthdays
}

func newInterner() *interner {
	return &interner{lists: map[string][]string{}, values: map[string]any{}, texts: map[string]string{},
		profiles: map[string]*profile{}, birthdays: map[string]*birthdays{}}
}

// person makes f a Person: its profile and birthdays are those an earlier
// person with equal ones holds, or copies of f's kept for the next.
// f's texts and lists are already its own (not slices of a row).
func (in *interner) person(f *personFields) *Person {
	p := &Person{UserID: f.UserID, Name: f.Name, Manager: in.text(f.Manager)}
	bk := f.Birthday + "\x00" + f.LunarBirthday // solar and lunar are read from these
	if p.birthdays = in.birthdays[bk]; p.birthdays == nil {
		b := f.birthdays
		b.Birthday, b.LunarBirthday = in.text(b.Birthday), in.text(b.LunarBirthday)
		p.birthdays = &b
		in.birthdays[bk] = p.birthdays
	}
	pk, ok := profileKey(&f.profile)
	if p.profile = in.profiles[pk]; p.profile == nil || !ok {
		pr := f.profile
		pr.Department, pr.Timezone = in.text(pr.Department), in.text(pr.Timezone)
		pr.Roles, pr.Departments, pr.Tags = in.list(pr.Roles), in.list(pr.Departments), in.list(pr.Tags)
		p.profile = &pr
		if ok {
			in.profiles[pk] = p.profile
		}
	}
	return p
}

// profileKey is a text equal for equal profiles and different for
// different ones, and false when a value cannot be written as one (a NaN
// in a list): that person keeps a profile of its own.
func profileKey(pr *profile) (string, bool) {
	b := make([]byte, 0, 128)
	str := func(s string) { // its length first: no text can end another's
		b = append(append(strconv.AppendInt(b, int64(len(s)), 10), ':'), s...)
	}
	list := func(l []string) {
		b = append(b, '[')
		for _, x := range l {
			str(x)
		}
		b = append(b, ']')
	}
	str(pr.Department)
	str(pr.Timezone)
	list(pr.Roles)
	list(pr.Departments)
	list(pr.Tags)
	if q := pr.Quiet; q != nil { // each number ends with a mark: no digits run on into the next length
		b = strconv.AppendInt(append(b, 'q'), int64(q.From), 10)
		b = append(strconv.AppendInt(append(b, '-'), int64(q.To), 10), ';')
	}
	for _, x := range pr.extras {
		str(x.key)
		switch v := x.value.(type) {
		case string:
			str(v)
		case bool:
			b = strconv.AppendBool(append(b, 'b'), v)
		default: // a number or a list: JSON tells 1 from "1" and keeps a list's order
			j, err := json.Marshal(v)
			if err != nil {
				return "", false
			}
			b = append(b, 'j')
			str(string(j)) // with its length, like a text: a number's digits would run on into the next length
		}
	}
	return string(b), true
}

// text is s, or the equal text an earlier person already holds: for the
// fields that many hold alike (a department, a manager, a zone, a
// birthday).
func (in *interner) text(s string) string {
	if s == "" {
		return ""
	}
	if prev, ok := in.texts[s]; ok {
		return prev
	}
	s = strings.Clone(s)
	in.texts[s] = s
	return s
}

// list is l, or the equal list an earlier person already holds.
func (in *interner) list(l []string) []string {
	if len(l) == 0 {
		return nil
	}
	k := listKey(l)
	if prev, ok := in.lists[k]; ok {
		return prev
	}
	shared := make([]string, len(l)) // exact length: an append by anyone copies, never writes into a shared array
	for i, x := range l {
		shared[i] = in.text(x)
	}
	in.lists[k] = shared
	return shared
}

// value is an other column's value with its text shared: a string is
// boxed once for everybody who holds it.
func (in *interner) value(v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	if prev, ok := in.values[s]; ok {
		return prev
	}
	s = in.text(s) // a copy, shared with the person fields of that text
	v = s
	in.values[s] = v
	return v
}

// listKey is a text equal for equal lists only: each item with its length
// first (items joined with NUL made ["a\x00b"] and ["a", "b"] one list).
func listKey(l []string) string {
	b := make([]byte, 0, 32)
	for _, x := range l {
		b = append(append(strconv.AppendInt(b, int64(len(x)), 10), ':'), x...)
	}
	return string(b)
}
