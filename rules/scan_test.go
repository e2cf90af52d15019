package rules

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// secretLine is what a file outside the rules directory holds (as
// /etc/shadow would): it must never be read into a status or an error.
const secretLine = "root:$6$SECRETHASHxyz:19000:0:99999:7:::"

// Issue 19: `ln -s /etc/shadow x.lua` in the rules directory was read,
// and its parse error quoted the file into /v1/status. A rule, people or
// calendar file, or a directory, that resolves outside the rules
// directory is refused with its path, and not read. On the code before,
// x.lua's status was a syntax error near a token of the secret.
func TestFileOutsideTheRulesDirIsRefused(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	secret := filepath.Join(outside, "shadow")
	require.NoError(t, os.WriteFile(secret, []byte(secretLine+"\n"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(outside, "more"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "more", "r.lua"), []byte(secretLine+"\n"), 0o600))

	dir := newDir(t, map[string]string{"r.lua": simpleRule("r", `return { "ann" }`), "calendars/.keep": ""})
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "x.lua")))
	require.NoError(t, os.Symlink(filepath.Join("..", filepath.Base(outside), "shadow"), filepath.Join(dir, "rel.lua")))
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "people.csv")))
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "calendars", "c.yaml")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "more"), filepath.Join(dir, "more")))
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "notes.txt"))) // not a rules file: ignored, as before

	s := load(t, dir)
	got := map[string]string{}
	for _, st := range s.Status() {
		require.NotContains(t, st.Error, "SECRET", st.File)
		require.NotContains(t, st.Error, "19000", st.File)
		got[st.File] = st.Error
	}
	want := map[string]string{"x.lua": secret, "people.csv": secret, "calendars/c.yaml": secret, "more": filepath.Join(outside, "more")}
	for f, target := range want {
		require.Contains(t, got, f)
		realTarget, err := filepath.EvalSymlinks(target)
		require.NoError(t, err)
		require.Contains(t, got[f], "refused: "+f+" resolves to "+realTarget+", outside the rules directory", f)
	}
	if _, ok := got["rel.lua"]; ok { // t.TempDir()s are siblings only sometimes
		require.Contains(t, got["rel.lua"], "outside the rules directory")
	}
	require.NotContains(t, got, "notes.txt")
	require.Empty(t, got["r.lua"], "the rest loads")
	require.Len(t, s.Rules(), 1)
	require.Zero(t, s.cur.Load().people.Len(), "the people file was not read")
}

// Links inside the directory still work (a ConfigMap volume is made of
// them: TestConfigMapSwap), a link to .. is refused, not walked.
func TestLinkWithinTheRulesDirIsFollowed(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"team/t.lua": simpleRule("t", `return { "bob" }`)})
	require.NoError(t, os.Symlink(filepath.Join("team", "t.lua"), filepath.Join(dir, "alias.lua")))
	require.NoError(t, os.Symlink("..", filepath.Join(dir, "up")))
	s := load(t, dir)
	errs := map[string]string{}
	for _, st := range s.Status() {
		errs[st.File] = st.Error
	}
	require.Len(t, s.Rules(), 1)
	require.Contains(t, errs["team/t.lua"]+errs["alias.lua"], "is already used by", "both read (the same rule twice), neither refused")
	require.True(t, strings.HasPrefix(errs["up"], "refused: up resolves to "), errs["up"])
}

// A syntax error quotes at most a short token of the line, never the
// rest of it (an unterminated string's token is the whole line).
func TestSyntaxErrorQuotesAShortToken(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"e.lua": "x = \"" + secretLine + " and the rest of the line\ny = 1\n"})
	s := load(t, dir)
	st := s.Status()
	require.Len(t, st, 1)
	require.Contains(t, st[0].Error, "syntax error")
	require.NotContains(t, st[0].Error, "19000")
	require.LessOrEqual(t, len(st[0].Error), 80, st[0].Error)
}

// A people file may be large enough for a million people with every
// documented column (about 75 MiB), a calendar is still capped at 64 MiB,
// and a file over its cap is refused by its size, unread.
func TestPeopleFileCapIsItsOwn(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"r.lua": simpleRule("r", `return { "ann" }`), "calendars/.keep": ""})
	grow := func(name string, size int64) {
		f, err := os.Create(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(size)) // sparse: nothing is written
		require.NoError(t, f.Close())
	}
	grow("people.csv", maxPeopleFile+1)
	grow(filepath.Join("calendars", "c.yaml"), maxDataFile+1)
	s := load(t, dir)
	got := map[string]string{}
	for _, st := range s.Status() {
		got[st.File] = st.Error
	}
	require.Contains(t, got["people.csv"], fmt.Sprintf("over the %d byte limit", maxPeopleFile))
	require.Contains(t, got["calendars/c.yaml"], fmt.Sprintf("over the %d byte limit", maxDataFile))
	require.Greater(t, maxPeopleFile, 75<<20, "a million people of nine columns must fit")
}
