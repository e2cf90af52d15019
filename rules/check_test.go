package rules

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckExamples(t *testing.T) {
	t.Parallel()
	require.Empty(t, Check("examples"))
}

func TestCheckMissingDir(t *testing.T) {
	t.Parallel()
	errs := Check("does-not-exist")
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Message, "not found")
}

// TestCheckReportsFileAndLine puts one broken file at a time next to a good
// one and checks the error names the file and the line of the mistake.
func TestCheckReportsFileAndLine(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		file string
		line int
		want string
	}{
		"syntax": {"return rule {\n  name = \"x\"\n  channel = \"mock\",\n}\n", 3, "syntax error"},
		"unknown_field": {"return rule {\n  name = \"x\",\n  channel = \"mock\",\n  recipents = function() end,\n" +
			"  recipients = function() end,\n  message = function() end,\n}\n", 4, `unknown field "recipents"`},
		"bad_cron":      {ruleWith("schedule = \"0 25 * * *\","), 3, "bad cron"},
		"bad_zone":      {ruleWith("schedule = \"0 9 * * *\",\n  timezone = \"Asia/Shangai\","), 4, "Asia/Shangai"},
		"local_zone":    {ruleWith("timezone = \"Local\","), 3, "Local"},
		"bad_duration":  {ruleWith("deadline = \"2 hours\","), 3, "deadline"},
		"bad_retry":     {ruleWith("retry = { \"1m\", \"soon\" },"), 3, "retry[2]"},
		"bad_priority":  {ruleWith("priority = \"urgent\","), 3, "priority"},
		"bad_calendar":  {ruleWith("schedule = \"0 9 * * *\",\n  calendar = \"cn_workdays\","), 4, "unknown calendar"},
		"bad_shift":     {ruleWith("schedule = \"0 9 * * *\",\n  shift = \"next_workday\","), 4, "bad shift"},
		"shift_no_cron": {ruleWith("calendar = \"weekday\",\n  shift = \"skip\","), 4, "shift needs a schedule"},
		"bad_stagger":   {ruleWith("stagger = { jitter = \"5m\", batches = 3, spacing = \"1m\" },"), 3, "not both"},
		"wrong_type":    {ruleWith("channel2 = 1,"), 3, "unknown field"},
		"name_type":     {"return rule {\n  name = 42,\n  channel = \"mock\",\n  recipients = function() end,\n  message = function() end,\n}\n", 2, "want a string"},
		"no_message":    {"return rule {\n  name = \"x\",\n  channel = \"mock\",\n  recipients = function() end,\n}\n", 1, "message is required"},
		"runtime":       {"local x = nil\nlocal y = x.field\n" + ruleWith(""), 2, "attempt to index"},
		"not_a_rule":    {"return 42\n", 1, "return rule"},
		"dup_name":      {simpleRule("good", `return {}`), 2, `"good" is already used by a_good.lua`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := newDir(t, map[string]string{
				"a_good.lua": simpleRule("good", `return {}`),
				"z_bad.lua":  c.file,
			})
			errs := Check(dir)
			require.Len(t, errs, 1, "%v", errs)
			require.Equal(t, "z_bad.lua", errs[0].File)
			require.Equal(t, c.line, errs[0].Line, errs[0].String())
			require.Contains(t, errs[0].Message, c.want)
			require.Contains(t, errs[0].String(), "z_bad.lua:")
		})
	}
}

// ruleWith is a good rule with extra fields from line 3 on.
func ruleWith(fields string) string {
	return "return rule {\n  name = \"bad\",\n  " + fields + "\n  channel = \"mock\",\n" +
		"  recipients = function(run) return {} end,\n  message = function(run, to) return {} end,\n}\n"
}

func TestCheckDataFiles(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{
		"people.csv":          "userid,name,birthday\nalice,Alice,1990-01-01\nbob,Bob,1991-02-30\n",
		"calendars/acme.yaml": "base: cn_workday\nholidays:\n  - 2026-12-24\n  - 2026-13-01\n",
		"r.lua":               simpleRule("r", `return {}`),
	})
	errs := Check(dir)
	require.Len(t, errs, 2, "%v", errs)
	require.Equal(t, "calendars/acme.yaml", errs[0].File)
	require.Equal(t, 4, errs[0].Line)
	require.Equal(t, "people.csv", errs[1].File)
	require.Equal(t, 3, errs[1].Line)
	require.Contains(t, errs[1].Message, "1991-02-30")
}

// TestCheckByteOrderMark: editors on Windows save UTF-8 with a byte order
// mark. Lua 5.2 and later skip it; gopher-lua saw a syntax error on line 1.
// Lines after it still count from the file's first line.
func TestCheckByteOrderMark(t *testing.T) {
	t.Parallel()
	const bom = "\uFEFF"
	dir := newDir(t, map[string]string{
		"good.lua":            bom + simpleRule("good", `return { "ann" }`),
		"bad.lua":             bom + ruleWith("deadline = \"soon\","),
		"people.json":         bom + `[{"userid": "ann", "name": "Ann"}]`,
		"calendars/acme.yaml": bom + "base: cn_workday\nholidays:\n  - 2026-12-24\n",
	})
	errs := Check(dir)
	require.Len(t, errs, 1, "%v", errs)
	require.Equal(t, "bad.lua:3: deadline: \"soon\" is not a positive duration like \"90m\" or \"2h\"", errs[0].String())
	s := load(t, dir)
	out, err := plan(t, s, "good", "")
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, "ann", out[0].Recipient)
	p, ok := s.cur.Load().people.Get("ann")
	require.True(t, ok)
	require.Equal(t, "Ann", p.Name)
}

// TestCheckSameErrorEveryTime: with two mistakes in a file, check names the
// same one on every run (the first written), so that CI output and the
// status of two nodes agree.
func TestCheckSameErrorEveryTime(t *testing.T) {
	t.Parallel()
	var fields strings.Builder
	for i := range 12 {
		fmt.Fprintf(&fields, "typo%d = 1,\n  ", i)
	}
	dir := newDir(t, map[string]string{"r.lua": ruleWith(fields.String())})
	for range 10 {
		errs := Check(dir)
		require.Len(t, errs, 1)
		require.Contains(t, errs[0].String(), `r.lua:3: unknown field "typo0"`)
	}
}

// TestCheckSyntaxErrorAtEnd: a file that ends in the middle of something
// (an unclosed table, string or expression) is reported at its last line
// with content, like every other error, as file:line: message.
func TestCheckSyntaxErrorAtEnd(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{
		"a.lua": "return rule {",
		"b.lua": "return rule {\n  name = \"x\",\n\n\n",
		"c.lua": "return rule {\n  name = [[abc\n",
		"d.lua": "local x = = 1\n",
	})
	var got []string
	for _, e := range Check(dir) {
		got = append(got, e.String())
	}
	require.Equal(t, []string{
		"a.lua:1: syntax error at end of file",
		"b.lua:2: syntax error at end of file",
		"c.lua:2: syntax error: unterminated multiline string at end of file",
		"d.lua:1: syntax error near '='",
	}, got)
}
