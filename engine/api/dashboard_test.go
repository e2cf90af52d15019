package api

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/enginetest"
	"github.com/heraldhq/herald/engine/heraldtype"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const brokenRuleError = "weekly_report.lua:12: attempt to index a nil value (global 'peple')"

type fixture struct {
	fsm *engine.FSM
	rep *enginetest.Replicator
	api http.Handler
}

func testStatus() Status {
	return Status{
		NodeID: "n1", LeaderID: "n1", State: "leader", Term: 3, AppliedIndex: 42, RulesHash: "9f2c51d0a4b7e3c8",
		Warnings: []string{"cn_workday knows statutory holidays up to 2027 only"},
		Members: []MemberStatus{
			{ID: "n1", RaftAddr: "127.0.0.1:7001", HTTPAddr: "127.0.0.1:8001", Voter: true, Leader: true},
			{ID: "n2", RaftAddr: "127.0.0.1:7002", HTTPAddr: "127.0.0.1:8002", Voter: true},
			{ID: "n3", RaftAddr: "127.0.0.1:7003", HTTPAddr: "127.0.0.1:8003", Voter: true},
		},
		Rules: []RuleStatus{
			{Name: "daily_report", File: "daily_report.lua", Hash: "a1b2c3d4e5f60718"},
			{Name: "weekly_report", File: "weekly_report.lua", Hash: "0718a1b2c3d4e5f6", Error: brokenRuleError},
		},
		Channels: []heraldtype.ChannelStatus{
			{Name: "wecom_sales", Plugin: "wecom", Healthy: true},
			{Name: "mock", Plugin: "mock", Healthy: false, Error: "plugin exited: signal: killed"},
		},
	}
}

// setup builds the API over an empty FSM with a stub status.
func setup(t *testing.T) *fixture {
	rep := enginetest.New()
	f := &fixture{fsm: rep.FSM, rep: rep}
	f.api = New(Config{Hosts: []string{"example.com"}, FSM: f.fsm, Replicator: f.rep, StatusFunc: testStatus})
	return f
}

func get(h http.Handler, method, target string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	req.RemoteAddr = "127.0.0.1:40000" // a local client: no tokens are configured
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestDashboardServesPage(t *testing.T) {
	t.Parallel()
	f := setup(t)

	w := get(f.api, http.MethodGet, "/ui/")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
	require.Contains(t, w.Body.String(), `<meta charset="utf-8">`)
	require.Contains(t, w.Body.String(), `<script src="app.js" defer></script>`)
	require.Equal(t, "no-cache", w.Header().Get("Cache-Control"))
	require.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
	require.Contains(t, w.Header().Get("Content-Security-Policy"), "script-src 'self'")
	etag := w.Header().Get("ETag")
	require.NotEmpty(t, etag)

	// A browser revalidating an unchanged page gets a 304.
	w = get(f.api, http.MethodGet, "/ui/", "If-None-Match", etag)
	require.Equal(t, http.StatusNotModified, w.Code)
	require.Zero(t, w.Body.Len())

	require.Equal(t, http.StatusOK, get(f.api, http.MethodGet, "/ui/index.html").Code)
	require.Equal(t, http.StatusOK, get(f.api, http.MethodHead, "/ui/app.js").Code)
	w = get(f.api, http.MethodGet, "/")
	require.Equal(t, http.StatusFound, w.Code)
	require.Equal(t, "/ui/", w.Header().Get("Location"))
}

var assetRef = regexp.MustCompile(`(?:src|href)="([^"]+)"`)

func TestDashboardAssets(t *testing.T) {
	t.Parallel()
	f := setup(t)
	page := get(f.api, http.MethodGet, "/ui/").Body.String()
	want := map[string]string{
		".js":  "text/javascript; charset=utf-8",
		".css": "text/css; charset=utf-8",
	}
	seen := map[string]bool{}
	for _, m := range assetRef.FindAllStringSubmatch(page, -1) {
		ref := m[1]
		if strings.HasPrefix(ref, "data:") || strings.HasPrefix(ref, "/v1/") {
			continue // the inline icon; the API link for browsers without JS
		}
		require.NotContains(t, ref, "//", "the page must not load anything from another host: %s", ref)
		w := get(f.api, http.MethodGet, "/ui/"+ref)
		require.Equal(t, http.StatusOK, w.Code, ref)
		require.Equal(t, want[filepath.Ext(ref)], w.Header().Get("Content-Type"), ref)
		require.Equal(t, "no-cache", w.Header().Get("Cache-Control"), ref)
		require.NotEmpty(t, w.Header().Get("ETag"), ref)
		// The SVG namespace is a name, not an address the page loads.
		body := strings.ReplaceAll(w.Body.String(), `"http://www.w3.org/2000/svg"`, "")
		require.NotContains(t, body, "http://", ref)
		require.NotContains(t, body, "https://", ref)
		seen[filepath.Ext(ref)] = true
	}
	require.True(t, seen[".js"] && seen[".css"], "the page links its script and its style sheet: %v", seen)
}

func TestDashboardUnknownAsset(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, p := range []string{"/ui/nope.js", "/ui/web/app.js", "/ui/sub/", "/ui/app.js/x", "/ui/.hidden"} {
		w := get(f.api, http.MethodGet, p)
		require.Equal(t, http.StatusNotFound, w.Code, p)
		require.Contains(t, w.Body.String(), "no such dashboard file", p)
	}
}

// jsEndpoint finds the API patterns in app.js; every "/v1/" in the file must
// be one of them.
var jsEndpoint = regexp.MustCompile(`"(GET|POST|PUT|PATCH|DELETE) (/v1/[^"\s]*)"`)

// routed reports whether the API has a route for method and pattern (path
// parameters like {id} are filled in): the catch-all's "no such endpoint"
// and the mux's 405 mean it has none.
func routed(h http.Handler, method, pattern string) bool {
	target := regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(pattern, "probe")
	w := get(h, method, target)
	return w.Code != http.StatusMethodNotAllowed &&
		!(w.Code == http.StatusNotFound && strings.Contains(w.Body.String(), "no such endpoint"))
}

func TestDashboardCallsOnlyExistingEndpoints(t *testing.T) {
	t.Parallel()
	f := setup(t)
	js, err := webFiles.ReadFile("web/app.js")
	require.NoError(t, err)
	found := jsEndpoint.FindAllStringSubmatch(string(js), -1)
	require.GreaterOrEqual(t, len(found), 5)
	require.Equal(t, strings.Count(string(js), "/v1/"), len(found),
		`every API path in app.js must be written as "METHOD /v1/..." in its API table`)

	// The check itself can fail.
	require.False(t, routed(f.api, http.MethodGet, "/v1/nope"))
	require.False(t, routed(f.api, http.MethodDelete, "/v1/status"))

	for _, m := range found {
		require.True(t, routed(f.api, m[1], m[2]), "app.js calls %s %s, which the API does not serve", m[1], m[2])
	}
}
