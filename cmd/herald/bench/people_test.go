package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/rules"
)

// TestWritePeopleLoads: the generated files, two, nine and ten columns,
// are people files a node loads, and a rule planning the wide files by
// role or tag checks; the nine-column header has every documented column,
// the ten-column one tags as well.
func TestWritePeopleLoads(t *testing.T) {
	t.Parallel()
	for _, columns := range []int{2, 9, 10} {
		dir := t.TempDir()
		require.NoError(t, writePeople(filepath.Join(dir, "people.csv"), 50, columns))
		rule := `return people.where { roles = "sales" }`
		if columns == 10 {
			rule = `return people.in_tag "staff"`
		}
		src := benchRule("bench_burst", cronAt(time.Now()), "mock", "2h", rule)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "burst.lua"), []byte(src), 0o600))
		require.Empty(t, rules.CheckChannels(dir, []string{"mock"}), "columns=%d", columns)
		b, err := os.ReadFile(filepath.Join(dir, "people.csv"))
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		require.Len(t, lines, 51)
		switch columns {
		case 2:
			require.Equal(t, "userid,name", lines[0])
		case 9:
			require.Equal(t, strings.Join(wideColumns, ","), lines[0])
			require.Len(t, strings.Split(lines[1], ","), 9)
		case 10:
			require.Equal(t, strings.Join(wideColumns, ",")+",tags", lines[0])
			// people.in_tag "staff" plans everyone, as people.all() does.
			for _, l := range lines[1:] {
				require.Regexp(t, `,staff;region-(north|east|south|west)$`, l)
			}
		}
	}
}

func TestPeopleFileName(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{"x/wide.csv": "people.csv", "p.JSON": "people.json", "p.yml": "people.yml"} {
		got, err := peopleFileName(src)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := peopleFileName("people.txt")
	require.ErrorContains(t, err, "want a .csv")
}

// TestWritePeopleToCopiesTheFile: --people is copied under the name the
// nodes read; without it, N generated two-column people.
func TestWritePeopleToCopiesTheFile(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "nine.csv")
	require.NoError(t, writePeople(src, 5, 9))
	dst := t.TempDir()
	require.NoError(t, (&benchOpts{people: src}).writePeopleTo(dst, 100))
	want, err := os.ReadFile(src)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dst, "people.csv"))
	require.NoError(t, err)
	require.Equal(t, want, got)

	gen := t.TempDir()
	require.NoError(t, (&benchOpts{}).writePeopleTo(gen, 3))
	got, err = os.ReadFile(filepath.Join(gen, "people.csv"))
	require.NoError(t, err)
	require.Equal(t, "userid,name\nu000000,u000000\nu000001,u000001\nu000002,u000002\n", string(got))
}

// TestFillTasksSubmitsEachOnceConcurrently: every key is posted once, from
// several clients at once, with the rule and due time given.
func TestFillTasksSubmitsEachOnceConcurrently(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	keys := map[string]int{}
	var inFlight, most atomic.Int64
	release := make(chan struct{})
	var releaseOnce sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Key, Rule string
			DueAt     time.Time `json:"due_at"`
		}
		if r.Method != http.MethodPost || r.URL.Path != "/v1/tasks" || json.NewDecoder(r.Body).Decode(&body) != nil || body.Rule != "r" || body.DueAt.IsZero() {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		now := inFlight.Add(1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		if now >= 4 {
			releaseOnce.Do(func() { close(release) })
		}
		select { // hold the first requests until four are in flight at once
		case <-release:
		case <-time.After(5 * time.Second):
		}
		inFlight.Add(-1)
		mu.Lock()
		keys[body.Key]++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	res, err := fillTasks(context.Background(), strings.TrimPrefix(srv.URL, "http://"), "r", 50, 200, 8, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, keys, 200)
	for k, v := range keys {
		require.Equal(t, 1, v, k)
	}
	// The fill goes on after the tasks held before it (--held 50).
	require.Contains(t, keys, "bench-task-00000050")
	require.Contains(t, keys, "bench-task-00000249")
	require.NotContains(t, keys, "bench-task-00000049")
	require.GreaterOrEqual(t, most.Load(), int64(4), "submissions were concurrent")
	require.Positive(t, res.took)
	require.Positive(t, res.lastTenth)
}

// TestFillTasksStopsAtARefusal: a refused task ends the fill with its
// reason.
func TestFillTasksStopsAtARefusal(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"no rule r"}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	_, err := fillTasks(context.Background(), strings.TrimPrefix(srv.URL, "http://"), "r", 0, 50, 4, time.Now().Add(time.Hour))
	require.ErrorContains(t, err, "bench: task")
}
