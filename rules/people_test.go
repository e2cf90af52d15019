package rules

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/calendar"
)

func TestPeopleFormats(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"people.csv": "userid,name,roles,manager,birthday,lunar_birthday,region\n" +
			"boss,Boss,manager,,,,north\nann,Ann,sales;oncall,boss,1992-02-29,闰04-10,east\n",
		"people.json": `[
  {"userid": "boss", "name": "Boss", "roles": ["manager"], "region": "north"},
  {"userid": "ann", "name": "Ann", "roles": ["sales", "oncall"], "manager": "boss",
   "birthday": "1992-02-29", "lunar_birthday": "闰04-10", "region": "east"}
]`,
		"people.yaml": `- userid: boss
  name: Boss
  roles: [manager]
  region: north
- userid: ann
  name: Ann
  roles: [sales, oncall]
  manager: boss
  birthday: 1992-02-29
  lunar_birthday: 闰04-10
  region: east
`,
	}
	for name, content := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d, err := parsePeople(name, []byte(content))
			require.NoError(t, err)
			require.Equal(t, 2, d.Len())
			ann, ok := d.Get("ann")
			require.True(t, ok)
			require.Equal(t, []string{"sales", "oncall"}, ann.Roles)
			require.Equal(t, "boss", ann.Manager)
			require.Equal(t, "1992-02-29", ann.Birthday)
			require.Equal(t, lunarDay{month: 4, day: 10, leap: true}, ann.lunar)
			region, _ := ann.Extra("region")
			require.Equal(t, "east", region)
		})
	}
}

func TestPeopleErrors(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		name, content string
		line          int
		want          string
	}{
		"no_userid": {"people.csv", "userid,name\nann,Ann\n,Nobody\n", 3, "userid is missing"},
		"dup":       {"people.csv", "userid,name\nann,Ann\nann,Ann2\n", 3, "already used"},
		"manager":   {"people.csv", "userid,manager\nann,ghost\n", 2, `manager "ghost"`},
		"bad_bday":  {"people.csv", "userid,birthday\nann,1991-02-29\n", 2, "birthday"},
		"bad_lunar": {"people.csv", "userid,lunar_birthday\nann,13-01\n", 2, "lunar_birthday"},
		"reserved":  {"people.csv", "userid,missed\nann,x\n", 2, "reserved"},
		"bad_zone":  {"people.csv", "userid,timezone\nann,Mars/Olympus\n", 2, "timezone"},
		"json_line": {"people.json", "[\n  {\"userid\": \"a\"},\n  {\"name\": \"b\"}\n]", 3, "userid is missing"},
		// Lines counted on from entry to entry (multi-line entries, blank
		// lines): the fourth entry starts on line 9.
		"json_later_line": {"people.json", "[\n  {\"userid\": \"a\",\n   \"name\": \"A\"},\n\n  {\"userid\": \"b\"},\n  {\"userid\": \"c\",\n\n   \"name\": \"C\"},\n  {\"userid\": \"a\"}\n]", 9, "already used on line 2"},
		"yaml_line":       {"people.yaml", "- userid: a\n- name: b\n", 2, "userid is missing"},
		"csv_no_head":     {"people.csv", "name\nann\n", 1, "no userid column"},
		// Two timezone columns: the second silently won.
		"csv_dup_head": {"people.csv", "userid,timezone,name,timezone\nann,Asia/Shanghai,Ann,Europe/Berlin\n", 1, `column "timezone" twice`},
		// A file cut to nothing (an editor that truncates, then writes) is
		// an error in every format, so the last good directory stays.
		"empty_csv":  {"people.csv", "", 1, "the file is empty"},
		"empty_json": {"people.json", "\n", 1, "the file is empty"},
		"empty_yaml": {"people.yaml", " \n", 1, "the file is empty"},
		"empty_yml":  {"people.yml", "", 1, "the file is empty"},
		// A value no rule can be handed (a person is built for a rule at
		// most maxDepth deep): it failed whichever rule touched the person,
		// and with people as stubs, only when it was touched.
		"json_deep": {"people.json", "[{\"userid\": \"a\"},\n{\"userid\": \"b\", \"x\": " + strings.Repeat("[", maxDepth) + "1" + strings.Repeat("]", maxDepth) + "}]", 2, "x: lists nested more than"},
		"yaml_deep": {"people.yaml", "- userid: a\n  x: " + strings.Repeat("[", maxDepth) + "1" + strings.Repeat("]", maxDepth) + "\n", 1, "x: lists nested more than"},
		// Objects inside a list nest too (only JSON has them): they were
		// let through, and every run that touched b failed with "rule
		// panicked: value nested more than 64 deep".
		"json_deep_objects": {"people.json", "[{\"userid\": \"a\"},\n{\"userid\": \"b\", \"x\": " + strings.Repeat(`[{"a":`, maxDepth/2) + "1" + strings.Repeat("}]", maxDepth/2) + "}]", 2, "x: lists nested more than"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := parsePeople(c.name, []byte(c.content))
			require.ErrorIs(t, err, ErrPeople)
			msg, line := errorLine(err)
			require.Equal(t, c.line, line, msg)
			require.Contains(t, msg, c.want)
		})
	}
}

func date(t *testing.T, s string) calendar.Date {
	t.Helper()
	d, err := calendar.ParseDate(s)
	require.NoError(t, err)
	return d
}

func TestBirthdayPolicy(t *testing.T) {
	t.Parallel()
	person := func(solar, lunar string) *Person {
		p, err := newPerson(map[string]any{"userid": "p", "birthday": solar, "lunar_birthday": lunar}, newInterner())
		require.NoError(t, err)
		return p
	}
	on := func(p *Person, s string) string {
		d := date(t, s)
		kind, ok := birthdayOn(p, d, calendar.LunarOf(d))
		if !ok {
			return ""
		}
		return string(kind)
	}
	leapling := person("02-29", "")
	require.Equal(t, "solar", on(leapling, "2027-02-28"))
	require.Equal(t, "", on(leapling, "2027-03-01"))
	require.Equal(t, "", on(leapling, "2028-02-28"))
	require.Equal(t, "solar", on(leapling, "2028-02-29"))

	// Lunar 30th: find a year whose 腊月 has only 29 days, and one with 30.
	thirtieth := person("", "12-30")
	short, long := 0, 0
	for y := 2020; y < 2040 && (short == 0 || long == 0); y++ {
		if _, ok := calendar.SolarOfLunar(y, 12, 30, false); ok {
			long = y
		} else {
			short = y
		}
	}
	require.NotZero(t, short)
	require.NotZero(t, long)
	d29, _ := calendar.SolarOfLunar(short, 12, 29, false)
	require.Equal(t, "lunar", on(thirtieth, d29.String()), "29th of a short month")
	d29, _ = calendar.SolarOfLunar(long, 12, 29, false)
	d30, _ := calendar.SolarOfLunar(long, 12, 30, false)
	require.Equal(t, "", on(thirtieth, d29.String()), "not the 29th of a long month")
	require.Equal(t, "lunar", on(thirtieth, d30.String()))

	// Leap-month birthday: the leap month when the year has it, else the
	// regular month; a regular-month birthday never in the leap month.
	leapBorn := person("", "闰06-10")
	regularBorn := person("", "06-10")
	require.Equal(t, 6, calendar.LeapMonth(2025))
	inLeap, _ := calendar.SolarOfLunar(2025, 6, 10, true)
	inRegular, _ := calendar.SolarOfLunar(2025, 6, 10, false)
	require.Equal(t, "lunar", on(leapBorn, inLeap.String()))
	require.Equal(t, "", on(leapBorn, inRegular.String()))
	require.Equal(t, "", on(regularBorn, inLeap.String()))
	require.Equal(t, "lunar", on(regularBorn, inRegular.String()))
	require.NotEqual(t, 6, calendar.LeapMonth(2026))
	next, _ := calendar.SolarOfLunar(2026, 6, 10, false)
	require.Equal(t, "lunar", on(leapBorn, next.String()))

	// Same day by both calendars: greeted once.
	both := person("09-25", "08-15")
	require.Equal(t, "solar", on(both, "2026-09-25"))
}

// TestWhereManyValues: people.where with a long list of values (the
// userids an API task lists) is one lookup per person, not a scan of the
// list per person: 20,000 people by 100,000 long userids was a minute
// inside one Go call, which the time limit cannot interrupt.
func TestWhereManyValues(t *testing.T) {
	t.Parallel()
	const people, values = 20_000, 100_000
	prefix := strings.Repeat("x", 200)
	var b strings.Builder
	b.WriteString("userid,name\n")
	for i := range people {
		fmt.Fprintf(&b, "%s%d,N%d\n", prefix, i, i)
	}
	s := load(t, newDir(t, map[string]string{
		"people.csv": b.String(),
		"r.lua": exprRule("r", fmt.Sprintf(`(function()
      local ids, prefix = {}, string.rep("x", 200)
      for i = %d, %d do ids[#ids + 1] = prefix .. (i %% %d) end -- people's ids last
      return #people.where { userid = ids } .. " " .. #people.where { userid = ids, name = { "N7", "N8", "nobody" } }
    end)()`, people, people+values-1, values)),
	}), func(c *Config) { c.CallTimeout = 30 * time.Second }) // quadratic was minutes; load must not fail it
	out, err := plan(t, s, "r", "")
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%d 2", people), content(t, out[0].Payload))
}

// TestPeopleYAMLNumbersAsWritten: a YAML people file with numeric userids
// (employee numbers) keeps them as written. YAML reads 00123 as the octal
// 83, 0x1F as 31 and a 20-digit number as a float: a message for 00123
// went to userid "83".
func TestPeopleYAMLNumbersAsWritten(t *testing.T) {
	t.Parallel()
	d, err := parsePeople("people.yaml", []byte("- userid: 00123\n  name: 0x1F\n  manager: 12345678901234567890\n  level: 3\n"+
		"- userid: 12345678901234567890\n- userid: 1_000\n"))
	require.NoError(t, err)
	var ids []string
	for _, p := range d.people {
		ids = append(ids, p.UserID)
	}
	require.Equal(t, []string{"00123", "12345678901234567890", "1_000"}, ids)
	p, _ := d.Get("00123")
	require.Equal(t, "0x1F", p.Name)
	require.Equal(t, "12345678901234567890", p.Manager)
	level, _ := p.Extra("level")
	require.Equal(t, 3.0, level, "other columns stay numbers rules can compute with")
}

// TestNotUTF8Refused: Excel on a Chinese Windows saves CSV as GBK. The
// names went out as U+FFFD garbage in everyone's message: a people file
// that is not UTF-8 is refused at the line of its first stray byte.
func TestNotUTF8Refused(t *testing.T) {
	t.Parallel()
	gbk := "\xd5\xc5\xce\xb0" // 张伟 in GBK
	errs := Check(newDir(t, map[string]string{"people.csv": "userid,name\nann,Ann\nzhangwei," + gbk + "\n"}))
	require.Len(t, errs, 1, "%v", errs)
	require.Equal(t, 3, errs[0].Line, errs[0].String())
	require.Contains(t, errs[0].Message, "UTF-8")
	_, err := parsePeople("people.json", []byte(`[{"userid": "zhangwei", "name": "`+gbk+`"}]`))
	require.ErrorContains(t, err, "UTF-8")
}

// People of one file who hold the same lists share them, and a list
// shared so cannot be written through by an append; other columns are
// found by name, absent ones answer false.
func TestPeopleShareListsSafely(t *testing.T) {
	d, err := parsePeople("people.csv", []byte("userid,roles,region\na,sales;lead,east\nb,sales;lead,east\nc,support,\n"))
	require.NoError(t, err)
	a, _ := d.Get("a")
	b, _ := d.Get("b")
	c, _ := d.Get("c")
	require.Equal(t, []string{"sales", "lead"}, b.Roles)
	require.Same(t, &a.Roles[0], &b.Roles[0], "equal role lists are one list")
	grown := append(a.Roles, "x")
	require.Equal(t, []string{"sales", "lead", "x"}, grown)
	require.Equal(t, []string{"sales", "lead"}, b.Roles, "an append wrote into a shared list")
	region, ok := b.Extra("region")
	require.True(t, ok)
	require.Equal(t, "east", region)
	_, ok = c.Extra("region")
	require.False(t, ok, "an empty cell is no column")
	_, ok = a.Extra("level")
	require.False(t, ok)
}

// TestPeopleKeepNoRow: a person's texts are copies, not slices of the
// row the CSV reader read (one string per row): holding any one of them
// kept the whole row alive, 72 MB on every node at a million people.
func TestPeopleKeepNoRow(t *testing.T) {
	// Texts of 17 to 31 bytes, none a multiple of 8: a copy is an
	// allocation of its own, rounded up, so two copies never lie back to
	// back (shorter ones may share one of the allocator's tiny blocks).
	d, err := parsePeople("people.csv", []byte("userid,name,department,manager,timezone,roles,region\n"+
		"boss-of-the-company,The Boss Herself,headquarters-north,,America/Argentina/Buenos_Aires,managers-of-all,the-northern-region\n"+
		"ann-the-sales-person,Ann Of The East Coast,sales-east-department,boss-of-the-company,America/Argentina/Buenos_Aires,sales-east-region;lead-of-the-teams,the-eastern-region\n"))
	require.NoError(t, err)
	ann, _ := d.Get("ann-the-sales-person")
	region, _ := ann.Extra("region")
	texts := []string{ann.UserID, ann.Name, ann.Department, ann.Manager, ann.Timezone, ann.Roles[0], ann.Roles[1], region.(string)}
	// The reader keeps a row's fields back to back in one string, and a
	// list column's items one ";" apart: no two of the person's texts may
	// lie so.
	for i := 1; i < len(texts); i++ {
		prev, cur := texts[i-1], texts[i]
		end := uintptr(unsafe.Pointer(unsafe.StringData(prev))) + uintptr(len(prev))
		start := uintptr(unsafe.Pointer(unsafe.StringData(cur)))
		require.False(t, start == end || start == end+1, "%q and %q are slices of one row", prev, cur)
	}
	boss, _ := d.Get("boss-of-the-company")
	require.Same(t, unsafe.StringData(boss.Timezone), unsafe.StringData(ann.Timezone), "a text many hold alike is shared")
}

// TestPeopleShareProfiles: people alike in every shared field hold one
// profile and one birthdays record, and a person differing from the first
// in any one of them (a field left out of the key would merge it) reads
// its own. A person is 64 bytes: its userid, name, manager and two
// pointers.
func TestPeopleShareProfiles(t *testing.T) {
	t.Parallel()
	require.LessOrEqual(t, unsafe.Sizeof(Person{}), uintptr(64))
	base := `{"userid": %q, "name": "N", "department": "sales", "departments": ["sales", "east"], "roles": ["sales"],
  "tags": ["t1"], "timezone": "Asia/Shanghai", "quiet_hours": "22:00-08:00", "birthday": "1990-05-01",
  "lunar_birthday": "04-10", "region": "east", "level": 1, "skills": ["go", "lua"]%s}`
	variants := map[string]string{ // userid → what it changes
		"department":  `, "department": "support"`,
		"departments": `, "departments": ["sales", "west"]`,
		"roles":       `, "roles": ["sales", "lead"]`,
		"tags":        `, "tags": ["t2"]`,
		"timezone":    `, "timezone": "Asia/Tokyo"`,
		"quiet":       `, "quiet_hours": "21:00-08:00"`,
		"birthday":    `, "birthday": "1990-05-02"`,
		"lunar":       `, "lunar_birthday": "闰04-10"`,
		"region":      `, "region": "west"`,
		"level-text":  `, "level": "1"`,
		"level-bool":  `, "level": true`,
		"skills":      `, "skills": ["lua", "go"]`,
		"extra":       `, "floor": 3`,
	}
	entries := []string{fmt.Sprintf(base, "first", ""), fmt.Sprintf(base, "twin", "")}
	for id, change := range variants {
		// JSON keeps the last of a repeated key: the change wins.
		entries = append(entries, fmt.Sprintf(strings.Replace(base, "%s}", change+"%s}", 1), id, ""))
	}
	d, err := parsePeople("people.json", []byte("["+strings.Join(entries, ",\n")+"]"))
	require.NoError(t, err)
	first, _ := d.Get("first")
	twin, _ := d.Get("twin")
	require.Same(t, first.profile, twin.profile, "alike people share a profile")
	require.Same(t, first.birthdays, twin.birthdays, "alike people share birthdays")
	view := func(p *Person) string {
		return fmt.Sprintf("%q %q %q %q %q %v %q %q %+v %+v %#v", p.Department, p.Departments, p.Roles, p.Tags,
			p.Timezone, *p.Quiet, p.Birthday, p.LunarBirthday, p.solar, p.lunar, p.extras)
	}
	for id := range variants {
		p, ok := d.Get(id)
		require.True(t, ok, id)
		require.NotEqual(t, view(first), view(p), "%s: a change of it reads as the first person's", id)
	}
	region, _ := first.Extra("region")
	require.Equal(t, "east", region)
	level, _ := first.Extra("level")
	require.Equal(t, 1.0, level)
}

// TestPeopleProfileKeysDoNotRunOn: a number in the profile key had no
// length and no end, so its digits ran on into the next column name's
// length: {a: 1, "abc22:s…": true} and {a: 12, abc: "s…btrue"} made one
// key, and the second person read the first's columns (found in review).
func TestPeopleProfileKeysDoNotRunOn(t *testing.T) {
	t.Parallel()
	s17 := strings.Repeat("s", 17)
	data := `[{"userid": "first", "a": 1, "abc22:` + s17 + `": true},
 {"userid": "second", "a": 12, "abc": "` + s17 + `btrue"}]`
	d, err := parsePeople("people.json", []byte(data))
	require.NoError(t, err)
	second, _ := d.Get("second")
	a, _ := second.Extra("a")
	require.Equal(t, 12.0, a, "second reads first's column a")
	abc, ok := second.Extra("abc")
	require.True(t, ok, "second lost its column abc")
	require.Equal(t, s17+"btrue", abc)
}

// TestPeopleListsKeyedByItems: lists were shared by their items joined
// with NUL, so ["a\x00b"] and ["a", "b"] were one list; through the WeCom
// merge since each snapshot person's lists are shared too (found in
// review).
func TestPeopleListsKeyedByItems(t *testing.T) {
	t.Parallel()
	file, err := parsePeople("people.csv", []byte("userid\nzed\n"))
	require.NoError(t, err)
	d := mergeDirectory(file, &DirectorySnapshot{People: []DirectoryPerson{
		{UserID: "ann", Tags: []string{"a\x00b"}},
		{UserID: "bob", Tags: []string{"a", "b"}},
	}})
	ann, _ := d.Get("ann")
	bob, _ := d.Get("bob")
	require.Equal(t, []string{"a\x00b"}, ann.Tags)
	require.Equal(t, []string{"a", "b"}, bob.Tags, "bob reads ann's tags")
}
