package rules

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"
)

// watching starts s.Watch and stops it (waiting for it to return) at the
// end of the test.
func watching(t *testing.T, s *Set) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		require.NoError(t, s.Watch(ctx))
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// versionRule is a rule whose message says which version it is.
func versionRule(name, ver string) string {
	return `return rule {
  name = "` + name + `", channel = "mock",
  recipients = function(run) return { "alice" } end,
  message = function(run, to) return { content = "` + ver + `" } end,
}
`
}

// messageOf plans rule and returns the content of its one message ("" if
// the rule is not loaded).
func messageOf(t *testing.T, s *Set, rule string) string {
	out, err := plan(t, s, rule, "")
	if err != nil || len(out) != 1 {
		return ""
	}
	return string(out[0].Payload)
}

func hasMessage(t *testing.T, s *Set, rule, ver string) func() bool {
	return func() bool { return strings.Contains(messageOf(t, s, rule), `"`+ver+`"`) }
}

func TestWatchRenameSave(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"r.lua": versionRule("r", "v1")})
	s := load(t, dir)
	watching(t, s)
	// vim without backupcopy: move the original away, write a new file,
	// delete the backup.
	p := filepath.Join(dir, "r.lua")
	require.NoError(t, os.Rename(p, p+"~"))
	require.NoError(t, os.WriteFile(p, []byte(versionRule("r", "v2")), 0o644))
	require.NoError(t, os.Remove(p+"~"))
	waitFor(t, s, "v2", hasMessage(t, s, "r", "v2"))
}

func TestWatchAtomicReplace(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"r.lua": versionRule("r", "v1")})
	s := load(t, dir)
	watching(t, s)
	tmp := filepath.Join(dir, ".r.lua.tmp123")
	require.NoError(t, os.WriteFile(tmp, []byte(versionRule("r", "v2")), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "r.lua")))
	waitFor(t, s, "v2", hasMessage(t, s, "r", "v2"))
}

// TestWatchConfigMap replays how the kubelet updates a ConfigMap volume:
// files live in a timestamped directory reached through the ..data
// symlink, which is swapped atomically.
func TestWatchConfigMap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	publish := func(ts, ver string) {
		data := filepath.Join(dir, "..2026_12_01_"+ts)
		writeFiles(t, data, map[string]string{
			"r.lua":      versionRule("r", ver),
			"people.csv": "userid,name\nalice,Alice " + ver + "\n",
		})
		tmpLink := filepath.Join(dir, "..data_tmp")
		require.NoError(t, os.Symlink(filepath.Base(data), tmpLink))
		require.NoError(t, os.Rename(tmpLink, filepath.Join(dir, "..data")))
	}
	publish("01", "v1")
	for _, f := range []string{"r.lua", "people.csv"} {
		require.NoError(t, os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)))
	}
	s := load(t, dir)
	require.True(t, hasMessage(t, s, "r", "v1")())
	watching(t, s)
	publish("02", "v2")
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "..2026_12_01_01")))
	waitFor(t, s, "v2", hasMessage(t, s, "r", "v2"))
	waitFor(t, s, "people v2", func() bool {
		p, ok := s.cur.Load().people.Get("alice")
		return ok && p.Name == "Alice v2"
	})
	for _, st := range s.Status() {
		require.Empty(t, st.Error)
	}
}

func TestWatchNewSubdirAndDelete(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"r.lua": versionRule("r", "v1")})
	s := load(t, dir)
	watching(t, s)
	sub := filepath.Join(dir, "team", "east")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "e.lua"), []byte(versionRule("e", "v1")), 0o644))
	waitFor(t, s, "rule in new subdirectory", hasMessage(t, s, "e", "v1"))
	// The new directory is watched too: a later edit in it is seen.
	require.NoError(t, os.WriteFile(filepath.Join(sub, "e.lua"), []byte(versionRule("e", "v2")), 0o644))
	waitFor(t, s, "edit in new subdirectory", hasMessage(t, s, "e", "v2"))

	require.NoError(t, os.Remove(filepath.Join(dir, "r.lua")))
	waitFor(t, s, "rule removed", func() bool {
		_, ok := statusOf(s, "r.lua")
		return !ok && s.Schedule("r") == nil && messageOf(t, s, "r") == ""
	})
	_, err := plan(t, s, "r", "")
	require.ErrorIs(t, err, ErrUnknownRule)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "team")))
	waitFor(t, s, "subdirectory removed", func() bool { return len(s.Rules()) == 0 })
}

// TestWatchStorm rewrites a file 100 times as fast as possible; the set
// must end on the last content.
func TestWatchStorm(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"r.lua": versionRule("r", "v0")})
	s := load(t, dir)
	watching(t, s)
	p := filepath.Join(dir, "r.lua")
	for i := 1; i <= 100; i++ {
		require.NoError(t, os.WriteFile(p, []byte(versionRule("r", fmt.Sprintf("v%d", i))), 0o644))
	}
	waitFor(t, s, "v100", hasMessage(t, s, "r", "v100"))
}

// TestWatchLastGood breaks a loaded file: its last good version keeps
// running, the error shows in Status and the metric, and clears when the
// file is fixed.
func TestWatchLastGood(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	dir := newDir(t, map[string]string{"r.lua": versionRule("r", "v1"), "other.lua": versionRule("other", "v1")})
	s := load(t, dir, func(c *Config) { c.Registerer = reg })
	gauge := func() float64 {
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() != "herald_rule_errors" {
				continue
			}
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == "r.lua" {
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	require.Equal(t, 0.0, gauge())
	hash := s.Hash()
	watching(t, s)

	writeFiles(t, dir, map[string]string{"r.lua": "return rule {\n  name = \"r\",\n  channel = 7,\n}\n"})
	waitFor(t, s, "error in status", func() bool {
		st, _ := statusOf(s, "r.lua") // a scan may first catch the file half written
		return strings.Contains(st.Error, "channel: want a string")
	})
	st, _ := statusOf(s, "r.lua")
	require.Equal(t, 3, st.Line)
	require.Contains(t, st.Error, "channel: want a string")
	require.NotEmpty(t, st.Hash, "the last good version is in force")
	require.Equal(t, "r", st.Name)
	require.Equal(t, 1.0, gauge())
	require.True(t, hasMessage(t, s, "r", "v1")(), "last good version still plans")
	require.Equal(t, hash, s.Hash(), "the good set did not change")

	writeFiles(t, dir, map[string]string{"r.lua": versionRule("r", "v2")})
	waitFor(t, s, "fixed", hasMessage(t, s, "r", "v2"))
	st, _ = statusOf(s, "r.lua")
	require.Empty(t, st.Error)
	require.Equal(t, 0.0, gauge())
	require.NotEqual(t, hash, s.Hash())
}

// TestBrokenNewFile: a new file that never worked is not loaded; the
// others are.
func TestBrokenNewFile(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{"good.lua": versionRule("good", "v1"), "bad.lua": "return rule {"}))
	st, ok := statusOf(s, "bad.lua")
	require.True(t, ok)
	require.Empty(t, st.Hash)
	require.Contains(t, st.Error, "syntax error")
	require.Len(t, s.Rules(), 1)
}

func TestReloadWithoutChangeKeepsVersion(t *testing.T) {
	t.Parallel()
	s := load(t, newDir(t, map[string]string{"r.lua": versionRule("r", "v1")}))
	v := s.cur.Load()
	swapped, err := s.Reload()
	require.NoError(t, err)
	require.False(t, swapped)
	require.Same(t, v, s.cur.Load())
}

// TestEmptyPeopleFileKeepsLastGood: a people file cut to nothing leaves the
// directory that was in force (reloads of every format), rather than
// sending every rule to nobody.
func TestEmptyPeopleFileKeepsLastGood(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"people.csv", "people.yaml"} {
		good := map[string]string{"people.csv": "userid,roles\nann,sales\n", "people.yaml": "- userid: ann\n  roles: [sales]\n"}[name]
		dir := newDir(t, map[string]string{name: good, "r.lua": simpleRule("r", `return people.where { role = "sales" }`)})
		s := load(t, dir)
		writeFiles(t, dir, map[string]string{name: ""})
		_, err := s.Reload()
		require.NoError(t, err)
		st, ok := statusOf(s, name)
		require.True(t, ok)
		require.Contains(t, st.Error, "the file is empty", name)
		out, err := plan(t, s, "r", "")
		require.NoError(t, err)
		require.Len(t, out, 1, name)
	}
}

// TestScanOddEntries: links that loop, a link to itself, a link into a
// subdirectory (the same file twice), a device named like a rule file,
// and a subdirectory replaced by a file: the scan neither hangs nor
// reads what is not a regular file, and loads each rule once.
func TestScanOddEntries(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{
		"r.lua":      simpleRule("r", `return { "ann" }`),
		"team/t.lua": simpleRule("t", `return { "bob" }`),
	})
	require.NoError(t, os.Symlink(".", filepath.Join(dir, "loop")))
	require.NoError(t, os.Symlink("self.lua", filepath.Join(dir, "self.lua")))
	require.NoError(t, os.Symlink("team", filepath.Join(dir, "team2")))
	require.NoError(t, os.Symlink(os.DevNull, filepath.Join(dir, "null.lua")))
	s := load(t, dir)
	var files []string
	for _, st := range s.Status() {
		files = append(files, st.File)
		require.Empty(t, st.Error, st.File)
	}
	require.Equal(t, []string{"r.lua", "team/t.lua"}, files)
	require.Len(t, s.Rules(), 2)
	// The subdirectory becomes a file: its rule is gone, the rest stays.
	require.NoError(t, os.Remove(filepath.Join(dir, "team2")))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "team")))
	writeFiles(t, dir, map[string]string{"team": "not a directory"})
	changed, err := s.Reload()
	require.NoError(t, err)
	require.True(t, changed)
	require.Len(t, s.Rules(), 1)
	require.Equal(t, "r", s.Rules()[0].Name)
}

// TestReloadDuringRun: a reload that swaps the version while a run is in
// the middle of a call neither disturbs that run (it finishes on the old
// version) nor keeps the old version's state: the next run gets the new
// version.
func TestReloadDuringRun(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	dir := newDir(t, map[string]string{"r.lua": versionRule("r", "v1")})
	s := load(t, dir, func(c *Config) { c.CallTimeout = 5 * time.Second; c.PoolSize = 1 })
	s.testHook = func(sb *sandbox) {
		sb.base.RawSetString("pause", sb.L.NewFunction(func(L *lua.LState) int {
			entered <- struct{}{}
			<-release
			return 0
		}))
	}
	writeFiles(t, dir, map[string]string{"r.lua": strings.Replace(versionRule("r", "v2"), "return { \"alice\" }", "pause() return { \"alice\" }", 1)})
	_, err := s.Reload()
	require.NoError(t, err)
	done := make(chan string, 1)
	go func() { done <- messageOf(t, s, "r") }()
	<-entered
	writeFiles(t, dir, map[string]string{"r.lua": versionRule("r", "v3")})
	changed, err := s.Reload()
	require.NoError(t, err)
	require.True(t, changed)
	close(release)
	require.Contains(t, <-done, `"v2"`)
	require.Contains(t, messageOf(t, s, "r"), `"v3"`)
}

// TestDuplicateNameKeepsRuleInForce: a new file naming a rule that another
// file already defines is the broken one. It used to win when its name
// sorted first (a copy "a_daily.lua" of "daily.lua" made for an edit), so
// the rule in force switched files and the original was reported broken.
func TestDuplicateNameKeepsRuleInForce(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"daily.lua": simpleRule("daily", `return { "alice" }`)})
	s := load(t, dir)
	writeFiles(t, dir, map[string]string{"a_copy.lua": simpleRule("daily", `return { "bob" }`)})
	changed, err := s.Reload()
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, "daily.lua", ruleNamed(t, s, "daily").File)
	out, err := plan(t, s, "daily", "")
	require.NoError(t, err)
	require.Equal(t, "alice", out[0].Recipient)
	st, _ := statusOf(s, "a_copy.lua")
	require.Contains(t, st.Error, `rule name "daily" is already used by daily.lua`)
	st, _ = statusOf(s, "daily.lua")
	require.Empty(t, st.Error)

	// The copy broken, the original broken too: the original's last good
	// version stays, not the copy.
	writeFiles(t, dir, map[string]string{"daily.lua": "return rule {"})
	_, err = s.Reload()
	require.NoError(t, err)
	out, err = plan(t, s, "daily", "")
	require.NoError(t, err)
	require.Equal(t, "alice", out[0].Recipient)
}

// TestRescanReadsOnlyWhatChanged: a rescan that finds every file's stamp
// as it was, each still since before the last read, reads nothing (a
// rescan every 30 s read a 77 MB people file on every node); a file
// rewritten with its old size and modification time is read again (its
// change time moved), and so is one changed within the racy window, and
// everything once per fullReadInterval.
func TestRescanReadsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"people.csv": "userid,roles\nann,sales\n",
		"r.lua": simpleRule("r", `return people.where { role = "sales" }`)})
	s := load(t, dir)
	reads := func() int { s.reloadMu.Lock(); defer s.reloadMu.Unlock(); return s.reads }
	require.Equal(t, 1, reads())

	// Within the racy window (an hour here, so that a slow machine cannot
	// let it pass): read again.
	s.reloadMu.Lock()
	s.racy = time.Hour
	s.reloadMu.Unlock()
	swapped, err := s.Reload()
	require.NoError(t, err)
	require.False(t, swapped)
	require.Equal(t, 2, reads(), "a file changed within the racy window was not read again")

	s.reloadMu.Lock()
	s.racy = 0 // the files have been still long enough, without waiting
	s.reloadMu.Unlock()
	for range 3 {
		swapped, err = s.Reload()
		require.NoError(t, err)
		require.False(t, swapped)
	}
	require.Equal(t, 2, reads(), "an unchanged directory was read")

	// Same size, same modification time, other content (cp -p, rsync -t).
	path := filepath.Join(dir, "people.csv")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte("userid,roles\nbob,sales\n"), 0o644))
	require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
	swapped, err = s.Reload()
	require.NoError(t, err)
	require.True(t, swapped, "a rewrite that kept size and modification time was not seen")
	require.Equal(t, 3, reads())
	out, err := plan(t, s, "r", "")
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, "bob", out[0].Recipient)

	s.reloadMu.Lock()
	s.readAt = s.readAt.Add(-fullReadInterval)
	s.reloadMu.Unlock()
	_, err = s.Reload()
	require.NoError(t, err)
	require.Equal(t, 4, reads(), "no full read after fullReadInterval")
}

// TestRescanRetriesAFailedRead: a read that failed (EMFILE, EIO, ESTALE:
// nothing its stamp shows) is tried again at the next rescan; the stamps
// taken before it were kept, so the new people waited 10 minutes for the
// full read (found in review). Not parallel: it swaps readFile.
func TestRescanRetriesAFailedRead(t *testing.T) {
	dir := newDir(t, map[string]string{"people.csv": "userid\nann\n", "r.lua": simpleRule("r", `return people.all()`)})
	s := load(t, dir)
	s.reloadMu.Lock()
	s.racy = 0 // still long enough, without waiting
	s.reloadMu.Unlock()
	writeFiles(t, dir, map[string]string{"people.csv": "userid\nbob\n"})
	failed := false
	readFile = func(r *os.Root, rel string) ([]byte, error) {
		if rel == "people.csv" && !failed {
			failed = true
			return nil, syscall.EMFILE
		}
		return r.ReadFile(rel)
	}
	t.Cleanup(func() { readFile = (*os.Root).ReadFile })
	_, err := s.Reload()
	require.NoError(t, err)
	require.True(t, failed)
	st, _ := statusOf(s, "people.csv")
	require.Contains(t, st.Error, "too many open files")

	_, err = s.Reload() // the next rescan
	require.NoError(t, err)
	_, bob := s.cur.Load().people.Get("bob")
	require.True(t, bob, "a failed read was not tried again")
}

// TestRescanSeesALinkSwappedDuringTheRead: people.csv, a link, swapped
// from a to b between the stamp pass and the read (b's people are read)
// and later swapped back: the stamps kept were a's, so they matched again
// and b's people stayed in force (found in review).
func TestRescanSeesALinkSwappedDuringTheRead(t *testing.T) {
	t.Parallel()
	dir := newDir(t, map[string]string{"people-a.csv": "userid\nann\n", "people-b.csv": "userid\nbob\n",
		"r.lua": simpleRule("r", `return people.all()`)})
	link := func(target string) {
		tmp := filepath.Join(dir, ".tmp-link")
		_ = os.Remove(tmp)
		require.NoError(t, os.Symlink(target, tmp))
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, "people.csv")))
	}
	link("people-a.csv")
	s := load(t, dir)
	s.reloadMu.Lock()
	s.racy = 0
	s.beforeRead = func() { link("people-b.csv") }
	s.reloadMu.Unlock()
	writeFiles(t, dir, map[string]string{"r.lua": simpleRule("r", `return people.all() `)}) // a change: the rescan reads
	_, err := s.Reload()
	require.NoError(t, err)
	_, bob := s.cur.Load().people.Get("bob")
	require.True(t, bob, "the swap did not reach the read")

	s.reloadMu.Lock()
	s.beforeRead = nil
	s.reloadMu.Unlock()
	link("people-a.csv") // swapped back
	_, err = s.Reload()
	require.NoError(t, err)
	_, ann := s.cur.Load().people.Get("ann")
	require.True(t, ann, "people.csv names people-a.csv again, but b's people are in force")
}
