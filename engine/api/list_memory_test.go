package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
)

// maximalData is task data at the write limits: 64 KiB, in four strings of
// the largest size accepted.
func maximalData(i int) json.RawMessage {
	s := strings.Repeat("x", 16<<10-64)
	return json.RawMessage(fmt.Sprintf(`{"a%d":"%s","b":"%s","c":"%s","d":"%s"}`, i, s, s, s, s))
}

// fillMaximal puts n tasks with maximal data into the bundle's state.
func fillMaximal(t testing.TB, b *apiBundle, n int) {
	for i := range n {
		b.node.MustApply(t, engine.CmdSubmitTask, engine.SubmitTask{Key: fmt.Sprintf("max-%04d", i), Rule: "enquiry_timeout",
			DueAt: now0.Add(time.Duration(i) * time.Minute), Data: maximalData(i), Now: now0})
	}
}

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The list of 1,000 tasks of maximal data (64 MB in the state) is answered
// in pages of at most 4 MiB, each request allocating a bounded amount, and
// every task is reached through the cursor.
func TestListOfMaximalTasksIsBounded(t *testing.T) {
	b := setupAPI(t)
	n := 1000
	if raceEnabled {
		n = 200 // the same shape, at a speed the race detector allows
	}
	fillMaximal(t, b, n)
	var (
		rec   *httptest.ResponseRecorder
		pages int
		seen  = map[string]bool{}
		most  uint64
		cur   string
	)
	for {
		req := httptest.NewRequest(http.MethodGet, "/v1/tasks?limit=1000&cursor="+cur, nil)
		alloc := allocated(func() {
			rec = httptest.NewRecorder()
			b.h.ServeHTTP(rec, req)
		})
		most = max(most, alloc)
		require.Equal(t, http.StatusOK, rec.Code)
		require.LessOrEqual(t, rec.Body.Len(), 4<<20+64<<10, "one page is bounded in bytes")
		var page struct {
			Tasks []struct {
				Key string `json:"key"`
			} `json:"tasks"`
			Next string `json:"next"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page))
		require.NotEmpty(t, page.Tasks)
		for _, tv := range page.Tasks {
			require.False(t, seen[tv.Key], tv.Key)
			seen[tv.Key] = true
		}
		pages++
		if page.Next == "" || (raceEnabled && pages == 2) {
			break
		}
		cur = page.Next
	}
	if !raceEnabled {
		require.Len(t, seen, n, "every task is reached through the pages")
	}
	t.Logf("%d tasks × 64 KiB data:", n)
	t.Logf(" %d pages; a page ≤ %d bytes; at most %.1f MiB allocated per request", pages, 4<<20+64<<10, float64(most)/(1<<20))
	require.Less(t, most, slack(24<<20), "one list request allocates at most 24 MiB, whatever the state holds")
}

// BenchmarkListMaximalTasks reports what one GET /v1/tasks?limit=1000 over
// 1,000 tasks of maximal data allocates (B/op) and answers (bytes/page).
func BenchmarkListMaximalTasks(b *testing.B) {
	bundle := setupAPI(&testing.T{})
	fillMaximal(b, bundle, 1000)
	var size int
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		bundle.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/tasks?limit=1000", nil))
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/page")
}

// A submission of maximal size costs a bounded multiple of its body.
func TestSubmitOfMaximalDataIsBounded(t *testing.T) {
	b := setupAPI(t)
	body := `{"key":"big","rule":"enquiry_timeout","due_at":"2026-12-01T03:00:00Z","data":` + string(maximalData(0)) + `}`
	var rec *httptest.ResponseRecorder
	alloc := allocated(func() {
		rec = httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/tasks", strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		b.h.ServeHTTP(rec, req)
	})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	t.Logf("a %d-byte submission allocated %.1f× its body (%d bytes)", len(body), float64(alloc)/float64(len(body)), alloc)
	require.Less(t, alloc, slack(32*len(body)), "allocations (most of them garbage at once) stay a small multiple of the body")
}

// slack is a memory bound, loosened under the race detector.
func slack(n int) uint64 {
	if raceEnabled {
		return uint64(n) * 5 / 2
	}
	return uint64(n)
}
