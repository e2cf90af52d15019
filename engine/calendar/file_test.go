package calendar

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseFile(t *testing.T) {
	t.Parallel()
	src := `# Acme's calendar
base: cn_workday
holidays:
  - 2026-12-24
  - "2026-12-25"
workdays: [2026-12-27, 2026-10-05]
`
	c, err := ParseFile("acme", []byte(src))
	require.NoError(t, err)
	require.Equal(t, "acme", c.Name())
	require.False(t, c.IsWorkday(mustDate(t, "2026-12-24"))) // Thursday, company holiday
	require.False(t, c.IsWorkday(mustDate(t, "2026-12-25")))
	require.True(t, c.IsWorkday(mustDate(t, "2026-12-27")))  // Sunday, company workday
	require.True(t, c.IsWorkday(mustDate(t, "2026-10-05")))  // statutory holiday, overridden
	require.False(t, c.IsWorkday(mustDate(t, "2026-10-06"))) // base: still 国庆
	require.True(t, c.IsWorkday(mustDate(t, "2026-10-10")))  // base: 调休
	require.True(t, c.IsWorkday(mustDate(t, "2026-12-23")))

	empty, err := ParseFile("plain", []byte("base: every_day\nholidays:\nworkdays: []\n"))
	require.NoError(t, err)
	require.True(t, empty.IsWorkday(mustDate(t, "2026-10-03")))
}

func TestParseFileErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src string
		want      []string // substrings of the error
	}{
		{"empty", "", []string{"empty file"}},
		{"not a map", "- 2026-12-24\n", []string{"line 1", "want a mapping"}},
		{"no base", "holidays: [2026-12-24]\n", []string{"base: missing"}},
		{"bad base", "base: cn_workdays\n", []string{"line 1", `base: "cn_workdays" is not a built-in`, "cn_workday, weekday, every_day"}},
		{"base list", "base: [weekday]\n", []string{"line 1", "base: want one of"}},
		{"typo field", "base: weekday\nholiday: [2026-12-24]\n", []string{"line 2", `unknown field "holiday"`}},
		{"bad date", "base: weekday\nholidays:\n  - 2026-12-24\n  - 2026-13-01\n", []string{"line 4", "holidays[1]", `"2026-13-01"`, "YYYY-MM-DD"}},
		{"not a list", "base: weekday\nworkdays: 2026-12-27\n", []string{"line 2", "workdays: want a list"}},
		{"nested", "base: weekday\nworkdays:\n  - [2026-12-27]\n", []string{"line 3", "workdays[0]"}},
		{"both", "base: weekday\nholidays: [2026-12-24]\nworkdays:\n  - 2026-12-24\n", []string{"line 4", "workdays[0]", "holidays[0] (line 2)"}},
		{"twice", "base: weekday\nholidays: [2026-12-24, 2026-12-24]\n", []string{"line 2", "holidays[1]", "already listed"}},
		{"dup key", "base: weekday\nbase: cn_workday\n", []string{"line 2", "given twice (first on line 1)"}},
		{"yaml syntax", "base: [weekday\n", []string{"yaml"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseFile("acme", []byte(c.src))
			require.ErrorIs(t, err, ErrCalendarFile)
			require.Contains(t, err.Error(), `calendar "acme"`)
			for _, w := range c.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
	_, err := ParseFile("", []byte("base: weekday\n"))
	require.ErrorIs(t, err, ErrCalendarFile)
}
