package rules

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/heraldhq/herald/engine"
)

// ErrPeople is wrapped by every error reading a people file.
var ErrPeople = errors.New("bad people file")

// PeopleFiles are the names a directory file may have, in the rules
// directory's top level. At most one of them may exist.
var PeopleFiles = []string{"people.csv", "people.json", "people.yaml", "people.yml"}

// The directory's own fields; every other column is kept as an extra field.
const (
	fieldUserID        = "userid"
	fieldName          = "name"
	fieldDepartment    = "department"
	fieldRoles         = "roles"
	fieldManager       = "manager"
	fieldBirthday      = "birthday"
	fieldLunarBirthday = "lunar_birthday"
	fieldTimezone      = "timezone"
	fieldDepartments   = "departments" // every department; department is the first
	fieldTags          = "tags"
	fieldMissed        = "missed"        // reserved: set on `to`
	fieldBirthdayKind  = "birthday_kind" // reserved: set by people.birthdays_on
)

var knownPersonFields = []string{fieldUserID, fieldName, fieldDepartment, fieldRoles, fieldManager,
	fieldBirthday, fieldLunarBirthday, fieldTimezone, fieldDepartments, fieldTags}

// listFields are the fields that hold lists: `;`-separated in a CSV file.
var listFields = []string{fieldRoles, fieldDepartments, fieldTags}

// Person is one entry of the directory. What many people hold alike is
// held once and shared (see interner.person): a person is its userid, its
// name and its manager, and two pointers, 64 bytes on every node; the
// flat record it replaced was 232 (a million people of nine columns
// kept 320 MB on each node, most of it these records). The shared parts'
// fields read as the person's own (p.Department, p.Birthday); they are
// never written after the person is made.
type Person struct {
	UserID  string
	Name    string
	Manager string
	*profile
	*birthdays
}

// profile is what people of one department, role, zone and columns hold
// alike: a thousand salespeople of one region share one.
type profile struct {
	Department string
	Roles      []string
	Timezone   string
	// Departments are every department the person is in, Department
	// first; people.where { department = … } matches any of them.
	Departments []string
	// Tags are the person's tags (WeCom tags, or a people file's tags
	// column): people.in_tag and people.where { tag = … } read them.
	Tags []string
	// Quiet is the person's own quiet hours (the quiet_hours column,
	// "22:00-08:00" or "off"); nil: the rule's.
	Quiet *engine.QuietHours
	// extras are the other columns (strings, numbers, bools, lists), sorted
	// by name: tables are built in this order, so pairs() is the same on
	// every leader. A slice, not a map: a map of one column cost a person
	// about 300 bytes, on every node.
	extras []extraField
}

// birthdays are a person's birthdays as written and as read: shared by
// those born on the same days.
type birthdays struct {
	Birthday      string // YYYY-MM-DD or MM-DD
	LunarBirthday string // MM-DD, or 闰MM-DD / LMM-DD for a leap month

	solar monthDay
	lunar lunarDay
}

// personFields is a person while it is made (parsed, or merged with a
// directory snapshot): its own copy of every part, written freely, then
// made a Person by interner.person.
type personFields struct {
	UserID, Name, Manager string
	profile
	birthdays
}

// extraField is one of a person's other columns.
type extraField struct {
	key   string
	value any
}

// Extra is the person's column k other than the directory's own fields
// (a string, float64, bool or list), and whether it has one.
func (p *Person) Extra(k string) (any, bool) {
	i, ok := slices.BinarySearchFunc(p.extras, k, func(x extraField, k string) int { return strings.Compare(x.key, k) })
	if !ok {
		return nil, false
	}
	return p.extras[i].value, true
}

type monthDay struct{ month, day int }

type lunarDay struct {
	month, day int
	leap       bool
}

// Directory is the people directory a version of the rules sees. It is
// immutable once loaded.
type Directory struct {
	File   string
	people []*Person
	byID   userIndex       // by folded userid (foldID)
	extra  map[string]bool // extra field names present in any entry

	zonesOnce sync.Once
	zones     []string // the people's own zones, sorted (see Zones)
}

// Len is the number of people.
func (d *Directory) Len() int {
	if d == nil {
		return 0
	}
	return len(d.people)
}

// Get returns the person with userid id, whatever its case.
func (d *Directory) Get(id string) (*Person, bool) {
	if d == nil {
		return nil, false
	}
	return d.byID.find(d.people, id)
}

// lineError is an error with the line of the file it was found on.
type lineError struct {
	Line int
	Msg  string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// parsePeople reads a people file by its extension.
func parsePeople(name string, data []byte) (*Directory, error) {
	data = bytes.TrimPrefix(data, utf8BOM)
	if line, ok := notUTF8(data); ok {
		return nil, fmt.Errorf("%w: %w", ErrPeople, &lineError{Line: line, Msg: errNotUTF8})
	}
	if len(bytes.TrimSpace(data)) == 0 {
		// Most likely cut short by an editor or a copy: an error keeps the
		// directory in force, where an empty list would send to nobody.
		return nil, fmt.Errorf("%w: %w", ErrPeople, &lineError{Line: 1,
			Msg: "the file is empty (a directory with nobody in it is [] or a CSV header)"})
	}
	d := &Directory{File: name, extra: map[string]bool{}}
	var lines []int // each person's line, for the duplicate and manager checks
	in := newInterner()
	// Each row becomes a person as it is read, so a large file never holds
	// every row's field map at once beside the people made of them.
	each := func(r personRow) error {
		p, err := newPerson(r.fields, in)
		if err != nil {
			return &lineError{Line: r.line, Msg: err.Error()}
		}
		d.people = append(d.people, p)
		lines = append(lines, r.line)
		for _, x := range p.extras {
			d.extra[x.key] = true
		}
		return nil
	}
	var err error
	switch path.Ext(name) {
	case ".csv":
		err = peopleCSV(data, each)
	case ".json":
		err = peopleJSON(data, each)
	case ".yaml", ".yml":
		err = peopleYAML(data, each)
	default:
		err = fmt.Errorf("unknown people file type %q", path.Ext(name))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPeople, err)
	}
	// Repeats are found as the index is made, in file order.
	var i, prev int
	var dup bool
	if d.byID, i, prev, dup = indexUsers(d.people); dup {
		return nil, fmt.Errorf("%w: %w", ErrPeople, &lineError{Line: lines[i],
			Msg: fmt.Sprintf("userid %q is already used on line %d (as %q; WeCom userids ignore case)", d.people[i].UserID, lines[prev], d.people[prev].UserID)})
	}
	for i, p := range d.people {
		if p.Manager != "" {
			if _, ok := d.Get(p.Manager); !ok {
				return nil, fmt.Errorf("%w: %w", ErrPeople, &lineError{Line: lines[i],
					Msg: fmt.Sprintf("manager %q of %q is not in the directory", p.Manager, p.UserID)})
			}
		}
	}
	return d, nil
}

// errNotUTF8 says why a file with bytes that are not UTF-8 is refused:
// its names and texts would reach people as U+FFFD garbage.
const errNotUTF8 = "the file is not UTF-8 text (a spreadsheet or editor saved it as GBK? save it as UTF-8, \"CSV UTF-8\" in Excel)"

// notUTF8 returns the line of the first byte of data that is not UTF-8.
func notUTF8(data []byte) (int, bool) {
	if utf8.Valid(data) {
		return 0, false
	}
	off := 0
	for off < len(data) {
		r, n := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		off += n
	}
	return 1 + bytes.Count(data[:off], []byte("\n")), true
}

// foldID is a userid as WeCom compares them: without regard to case
// (ZhangSan and zhangsan are one member).
func foldID(id string) string { return strings.ToLower(id) }

type personRow struct {
	line   int
	fields map[string]any
}

func peopleCSV(data []byte, each func(personRow) error) error {
	r := csv.NewReader(bytes.NewReader(data))
	r.TrimLeadingSpace = true
	header, err := r.Read()
	if err != nil {
		return fmt.Errorf("header: %w", err)
	}
	for i := range header {
		header[i] = strings.TrimSpace(header[i])
		if header[i] != "" && slices.Contains(header[:i], header[i]) {
			return &lineError{Line: 1, Msg: fmt.Sprintf("header has the column %q twice", header[i])}
		}
	}
	if !slices.Contains(header, fieldUserID) {
		return &lineError{Line: 1, Msg: "header has no userid column"}
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		line, _ := r.FieldPos(0)
		fields := make(map[string]any, len(rec))
		for i, v := range rec {
			v = strings.TrimSpace(v)
			if v == "" {
				continue
			}
			if slices.Contains(listFields, header[i]) {
				var items []any
				for _, item := range strings.Split(v, ";") {
					if item = strings.TrimSpace(item); item != "" {
						items = append(items, item)
					}
				}
				fields[header[i]] = items
				continue
			}
			fields[header[i]] = v
		}
		if err := each(personRow{line: line, fields: fields}); err != nil {
			return err
		}
	}
}

func peopleJSON(data []byte, each func(personRow) error) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return &lineError{Line: 1, Msg: "want a JSON array of people"}
	}
	// Lines are counted on from the previous entry, not from the file's
	// start: counting from the start made a file of n people cost n²
	// (20,000 people took 2.3 s to parse; a million would take hours).
	line, counted := 1, 0
	for dec.More() {
		off := int(dec.InputOffset())
		for off < len(data) && bytes.IndexByte([]byte(" \t\r\n,"), data[off]) >= 0 {
			off++ // the offset is just after the previous entry
		}
		line += bytes.Count(data[counted:off], []byte("\n"))
		counted = off
		var fields map[string]any
		if err := dec.Decode(&fields); err != nil {
			return &lineError{Line: line, Msg: err.Error()}
		}
		if err := each(personRow{line: line, fields: fields}); err != nil {
			return err
		}
	}
	return nil
}

func peopleYAML(data []byte, each func(personRow) error) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return err
	}
	if len(doc.Content) == 0 {
		return nil
	}
	seq := doc.Content[0]
	if seq.Kind == yaml.MappingNode { // also accept {people: [...]}
		for i := 0; i+1 < len(seq.Content); i += 2 {
			if seq.Content[i].Value == "people" {
				seq = seq.Content[i+1]
				break
			}
		}
	}
	if seq.Kind != yaml.SequenceNode {
		return &lineError{Line: seq.Line, Msg: "want a list of people"}
	}
	for _, n := range seq.Content {
		if n.Kind != yaml.MappingNode {
			return &lineError{Line: n.Line, Msg: "want a mapping with userid, name, …"}
		}
		fields := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			val, err := yamlValue(v)
			if err != nil {
				return &lineError{Line: v.Line, Msg: fmt.Sprintf("%s: %v", k.Value, err)}
			}
			fields[k.Value] = val
		}
		if err := each(personRow{line: n.Line, fields: fields}); err != nil {
			return err
		}
	}
	return nil
}

// yamlNumber is a YAML number with the text it was written as: a
// directory field (a userid that is an employee number, 00123) keeps the
// text, where YAML would read 00123 as the octal 83 and a 20-digit number
// as a float; other columns get the number, for rules to compute with.
type yamlNumber struct {
	text  string
	value float64
}

func (n yamlNumber) String() string { return n.text }

// yamlValue keeps scalars as written (so 1990-02-29 is not a timestamp and
// 08-15 not a number) and lists as lists of those.
func yamlValue(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err == nil {
				return b, nil
			}
		case "!!int", "!!float":
			var f float64
			if err := n.Decode(&f); err == nil {
				return yamlNumber{text: n.Value, value: f}, nil
			}
		}
		return n.Value, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := yamlValue(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, errors.New("want a value or a list")
}

// newPerson checks and normalises one entry.
func newPerson(f map[string]any, in *interner) (*Person, error) {
	str := func(k string) (string, error) {
		switch v := f[k].(type) {
		case nil:
			return "", nil
		case string:
			return strings.TrimSpace(v), nil
		case json.Number:
			return v.String(), nil
		case yamlNumber:
			return v.text, nil
		}
		return "", fmt.Errorf("%s: want text, got %T", k, f[k])
	}
	p := &personFields{} // extras are made for the first other column: most people have none
	var err error
	for _, x := range []struct {
		key string
		dst *string
	}{
		{fieldUserID, &p.UserID}, {fieldName, &p.Name}, {fieldDepartment, &p.Department},
		{fieldManager, &p.Manager}, {fieldBirthday, &p.Birthday},
		{fieldLunarBirthday, &p.LunarBirthday}, {fieldTimezone, &p.Timezone},
	} {
		if *x.dst, err = str(x.key); err != nil {
			return nil, err
		}
	}
	if p.UserID == "" {
		return nil, errors.New("userid is missing")
	}
	// Copies, not slices of the row the reader read (see interner): each
	// person's own, or shared with those who hold the same.
	p.UserID, p.Name = strings.Clone(p.UserID), strings.Clone(p.Name)
	for _, t := range []*string{&p.Department, &p.Manager, &p.Birthday, &p.LunarBirthday, &p.Timezone} {
		*t = in.text(*t)
	}
	for _, l := range []struct {
		key string
		dst *[]string
	}{{fieldRoles, &p.Roles}, {fieldDepartments, &p.Departments}, {fieldTags, &p.Tags}} {
		if *l.dst, err = listField(l.key, f[l.key]); err != nil {
			return nil, err
		}
	}
	if p.Department == "" && len(p.Departments) > 0 {
		p.Department = p.Departments[0]
	}
	if p.Department != "" && !slices.Contains(p.Departments, p.Department) {
		p.Departments = append([]string{p.Department}, p.Departments...)
	}
	p.Roles, p.Departments, p.Tags = in.list(p.Roles), in.list(p.Departments), in.list(p.Tags)
	if p.Birthday != "" {
		if p.solar, err = parseSolarBirthday(p.Birthday); err != nil {
			return nil, err
		}
	}
	if p.LunarBirthday != "" {
		if p.lunar, err = parseLunarBirthday(p.LunarBirthday); err != nil {
			return nil, err
		}
	}
	if p.Timezone != "" {
		if _, err := loadZone(p.Timezone); err != nil {
			return nil, fmt.Errorf("timezone %q: not a known IANA zone", clipToken(p.Timezone))
		}
	}
	if err := p.readQuiet(f); err != nil {
		return nil, err
	}
	for k, v := range f {
		if slices.Contains(knownPersonFields, k) {
			continue
		}
		if k == fieldMissed || k == fieldBirthdayKind {
			return nil, fmt.Errorf("%q is a reserved field name", k)
		}
		if v == nil {
			continue
		}
		v = numberValue(v)
		switch v.(type) {
		case string, float64, bool, []any:
		default:
			return nil, fmt.Errorf("%s: want text, a number, true/false or a list", k)
		}
		if tooDeep(v, 1) {
			return nil, fmt.Errorf("%s: lists nested more than %d deep", k, maxDepth-1)
		}
		p.extras = append(p.extras, extraField{key: in.text(k), value: in.value(v)})
	}
	slices.SortFunc(p.extras, func(a, b extraField) int { return strings.Compare(a.key, b.key) })
	return in.person(p), nil
}

// tooDeep reports whether v, a person's field at depth (the person being
// 0), holds a value deeper than a rule can be handed (fromGo stops at
// maxDepth, counting lists and the objects a JSON list may hold alike).
// Refused here it is a bad row; at run time it failed whichever rule
// first touched the person, and outside a Lua call (a recipient filled
// for its message) as a panic.
func tooDeep(v any, depth int) bool {
	if depth > maxDepth {
		return true
	}
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			if tooDeep(x, depth+1) {
				return true
			}
		}
	case map[string]any:
		for _, x := range v {
			if tooDeep(x, depth+1) {
				return true
			}
		}
	}
	return false
}

// numberValue turns the numbers of a people file (JSON's json.Number,
// YAML's yamlNumber), also inside a list, into float64s for rules.
func numberValue(v any) any {
	switch v := v.(type) {
	case json.Number:
		f, _ := v.Float64()
		return f
	case yamlNumber:
		return v.value
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = numberValue(x)
		}
		return out
	}
	return v
}

// listField reads a list field: a list of names, or one text of
// `;`-separated names.
func listField(key string, v any) ([]string, error) {
	var out []string
	switch v := v.(type) {
	case nil:
	case string:
		for _, r := range strings.Split(v, ";") {
			if r = strings.TrimSpace(r); r != "" {
				out = append(out, r)
			}
		}
	case []any:
		for _, r := range v {
			if n, ok := r.(yamlNumber); ok {
				r = n.text // a department or tag named 2024 stays "2024"
			}
			s, ok := r.(string)
			if !ok {
				return nil, fmt.Errorf("%s: want a list of names, got %T", key, r)
			}
			if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	default:
		return nil, fmt.Errorf("%s: want a list, got %T", key, v)
	}
	return out, nil
}

// parseSolarBirthday reads YYYY-MM-DD or MM-DD. 02-29 is allowed without a
// year; with a year it must be a leap year.
func parseSolarBirthday(s string) (monthDay, error) {
	if len(s) == len("2006-01-02") {
		t, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return monthDay{}, fmt.Errorf("birthday %q: want YYYY-MM-DD or MM-DD", clipToken(s))
		}
		return monthDay{int(t.Month()), t.Day()}, nil
	}
	var m, d int
	if _, err := fmt.Sscanf(s, "%02d-%02d", &m, &d); err != nil || len(s) != 5 {
		return monthDay{}, fmt.Errorf("birthday %q: want YYYY-MM-DD or MM-DD", clipToken(s))
	}
	// 2000 is a leap year, so 02-29 is valid and 02-30 is not.
	if t := time.Date(2000, time.Month(m), d, 0, 0, 0, 0, time.UTC); int(t.Month()) != m || t.Day() != d {
		return monthDay{}, fmt.Errorf("birthday %q: no such day", clipToken(s))
	}
	return monthDay{m, d}, nil
}

// parseLunarBirthday reads a lunar month and day, "08-15"; a birthday in a
// leap month is written "闰04-10" (or "L04-10"). Days run 1..30.
func parseLunarBirthday(s string) (lunarDay, error) {
	var ld lunarDay
	rest := s
	for _, p := range []string{"闰", "L", "l"} {
		if strings.HasPrefix(rest, p) {
			ld.leap, rest = true, strings.TrimPrefix(rest, p)
			break
		}
	}
	if _, err := fmt.Sscanf(rest, "%02d-%02d", &ld.month, &ld.day); err != nil || len(rest) != 5 ||
		ld.month < 1 || ld.month > 12 || ld.day < 1 || ld.day > 30 {
		return lunarDay{}, fmt.Errorf("lunar_birthday %q: want MM-DD (month 1-12, day 1-30), with 闰 before a leap month", clipToken(s))
	}
	return ld, nil
}
