package rules

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/heraldhq/herald/engine"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait for a reload in tests.
const waitTimeout = 10 * time.Second

// writeFiles writes name -> content under dir, creating subdirectories.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// newDir makes a rules directory with files.
func newDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	return dir
}

// load loads dir with test-friendly limits.
// exampleCopies is a rules directory holding copies of the named files of
// rules/examples.
func exampleCopies(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("examples", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	return dir
}

func load(t *testing.T, dir string, opts ...func(*Config)) *Set {
	t.Helper()
	cfg := Config{Dir: dir, CallTimeout: 300 * time.Millisecond, Debounce: 10 * time.Millisecond, RescanInterval: time.Hour}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := Load(cfg)
	require.NoError(t, err)
	return s
}

// simpleRule is a minimal good rule file whose recipients function has the
// given body.
func simpleRule(name, recipientsBody string) string {
	return `return rule {
  name = "` + name + `",
  channel = "mock",
  recipients = function(run)
    ` + recipientsBody + `
  end,
  message = function(run, to)
    return { msgtype = "text", content = "hi " .. to.userid }
  end,
}
`
}

// statusOf returns the status of file.
func statusOf(s *Set, file string) (FileStatus, bool) {
	for _, st := range s.Status() {
		if st.File == file {
			return st, true
		}
	}
	return FileStatus{}, false
}

// waitFor waits, with a deadline, until cond holds; it re-checks after
// every reload signal.
func waitFor(t *testing.T, s *Set, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-s.Changed():
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; status: %+v", what, s.Status())
		}
	}
}

// plan runs rule at a fixed slot.
func plan(t *testing.T, s *Set, rule string, data string) ([]engine.Planned, error) {
	t.Helper()
	run := engine.RunContext{Rule: rule, Key: "test", Slot: time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)}
	if data != "" {
		run.Data = []byte(data)
	}
	return s.Plan(context.Background(), rule, run)
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return at
}

func runAt(slot time.Time) engine.RunContext {
	return engine.RunContext{Key: "test", Slot: slot}
}

// plannedIDs are the recipients of a plan, in its order.
func plannedIDs(out []engine.Planned) []string {
	var ids []string
	for _, p := range out {
		ids = append(ids, p.Recipient)
	}
	return ids
}
