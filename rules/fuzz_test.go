package rules

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/heraldhq/herald/engine/calendar"
)

// maxFuzzFile bounds a fuzzed file: larger inputs only slow the run, and
// the loaders' own size limits are tested elsewhere.
const maxFuzzFile = 64 << 10

// FuzzCompileRule compiles arbitrary rule file text in the sandbox with a
// short time limit, as a load does. Properties: no panic; every refusal
// is a *RuleError naming the file, on a line the file has, matching
// ErrRule; an accepted file's hash is its content's.
func FuzzCompileRule(f *testing.F) {
	for _, s := range []string{
		"return rule { name = \"a\", trigger = { cron = \"0 9 * * *\" }, channel = \"mock\", run = function(ctx) return {} end }\n",
		"\xef\xbb\xbfreturn rule { name = \"bom\", trigger = { cron = \"@hourly\", timezone = \"Asia/Shanghai\" }, run = function() end }",
		"while true do end",
		"return 1",
		"return rule {",
		"local s = string.rep(\"x\", 1e9) return rule { name = s }",
		"error(setmetatable({}, {__tostring = function() error('x') end}))",
		"return rule { name = \"a\", events = { \"x\" }, retry = { max = -1 } }",
		"x = [[",
		"return rule { name = (\"\"):rep(10), stagger = \"1h\", digest = {} }",
	} {
		f.Add([]byte(s))
	}
	sb := newSandbox(&env{calendars: calendar.NewRegistry(), logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	f.Cleanup(func() { sb.L.Close() })
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) > maxFuzzFile {
			t.Skip()
		}
		if sb.broken { // a stopped call leaves its state unusable
			sb.L.Close()
			sb = newSandbox(sb.env)
		}
		const file = "fuzz.lua"
		c, err := compileFile(context.Background(), sb, file, src, 50*time.Millisecond)
		if err != nil {
			var re *RuleError
			if !errors.As(err, &re) {
				t.Fatalf("error %T %v is not a *RuleError", err, err)
			}
			if re.File != file {
				t.Fatalf("error names file %q, want %q: %v", re.File, file, err)
			}
			// Lua ends a line at \n, \r, \r\n or \n\r: at most one line per
			// break byte, plus the last.
			if lines := bytes.Count(src, []byte("\n")) + bytes.Count(src, []byte("\r")) + 1; re.Line < 0 || re.Line > lines {
				t.Fatalf("error on line %d, the file has at most %d: %v", re.Line, lines, err)
			}
			if !errors.Is(err, ErrRule) {
				t.Fatalf("error %v is not ErrRule", err)
			}
			return
		}
		if c.hash != contentHash(src) || c.file != file {
			t.Fatalf("compiled %q hash %q, want %q %q", c.file, c.hash, file, contentHash(src))
		}
	})
}

// FuzzPeopleFile parses arbitrary people files (CSV, and the JSON and YAML
// forms by the first byte of the input). Properties: no panic; a refusal
// matches ErrPeople; an accepted directory finds each person by userid in
// any case, has no two people whose userids fold alike, and every manager
// named is in it; parsing is deterministic.
func FuzzPeopleFile(f *testing.F) {
	for _, s := range []struct {
		kind byte
		data string
	}{
		{0, "userid,name,manager,tags\nzhangsan,张三,,eng;oncall\nlisi,李四,zhangsan,eng\n"},
		{0, "\xef\xbb\xbfuserid, name\n ZhangSan , Z\nzhangsan,z\n"},
		{0, "userid,userid\na,b\n"},
		{0, "name\nx\n"},
		{0, "userid,\"name\nx\n"},
		{0, "userid,name\na,b,c\n"},
		{0, "userid\n\xff\n"},
		{1, `[{"userid":"a","manager":"b"},{"userid":"b","birthday":"02-29"}]`},
		{1, `[{"userid":1}]`},
		{2, "people:\n  - userid: a\n    tags: [x, y]\n"},
		{2, "- &a {userid: a}\n- *a\n"},
	} {
		f.Add(s.kind, []byte(s.data))
	}
	f.Fuzz(func(t *testing.T, kind byte, data []byte) {
		if len(data) > maxFuzzFile {
			t.Skip()
		}
		name := [...]string{"people.csv", "people.json", "people.yaml"}[int(kind)%3]
		d, err := parsePeople(name, data)
		if err != nil {
			if !errors.Is(err, ErrPeople) {
				t.Fatalf("%s: error %v is not ErrPeople", name, err)
			}
			return
		}
		if d.Len() != len(d.people) {
			t.Fatalf("Len %d, %d people", d.Len(), len(d.people))
		}
		folded := map[string]bool{}
		for _, p := range d.people {
			if folded[foldID(p.UserID)] {
				t.Fatalf("userid %q twice", p.UserID)
			}
			folded[foldID(p.UserID)] = true
			for _, id := range []string{p.UserID, foldID(p.UserID)} {
				if got, ok := d.Get(id); !ok || got != p {
					t.Fatalf("Get(%q) = %v, %v; want %q", id, got, ok, p.UserID)
				}
			}
			if p.Manager != "" {
				if _, ok := d.Get(p.Manager); !ok {
					t.Fatalf("manager %q of %q not in the directory", p.Manager, p.UserID)
				}
			}
		}
		again, err := parsePeople(name, data)
		if err != nil || again.Len() != d.Len() {
			t.Fatalf("second parse: %d people, %v; first had %d", again.Len(), err, d.Len())
		}
	})
}
