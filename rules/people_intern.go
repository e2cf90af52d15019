package rules

import "strings"

// interner shares what many people of one people file hold alike: their
// role, department and tag lists (a thousand salespeople hold one
// ["sales"]) and the text of other columns (a region, a level). A
// person's lists and values are never changed after parsing (rules get
// copies as Lua tables), so sharing them is invisible. It lives for one
// parse.
type interner struct {
	lists  map[string][]string
	values map[string]any // a string and its one boxed copy
}

func newInterner() *interner {
	return &interner{lists: map[string][]string{}, values: map[string]any{}}
}

// list is l, or the equal list an earlier person already holds.
func (in *interner) list(l []string) []string {
	if len(l) == 0 {
		return nil
	}
	k := strings.Join(l, "\x00")
	if prev, ok := in.lists[k]; ok {
		return prev
	}
	l = l[:len(l):len(l)] // an append by anyone copies, never writes into a shared array
	in.lists[strings.Clone(k)] = l
	return l
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
	in.values[s] = v
	return v
}
