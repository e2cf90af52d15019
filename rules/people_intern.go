package rules

import "strings"

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
	lists  map[string][]string
	values map[string]any    // a string and its one boxed copy
	texts  map[string]string // the person fields many people share alike
}

func newInterner() *interner {
	return &interner{lists: map[string][]string{}, values: map[string]any{}, texts: map[string]string{}}
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
	k := strings.Join(l, "\x00")
	if prev, ok := in.lists[k]; ok {
		return prev
	}
	shared := make([]string, len(l)) // exact length: an append by anyone copies, never writes into a shared array
	for i, x := range l {
		shared[i] = in.text(x)
	}
	in.lists[strings.Clone(k)] = shared
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
