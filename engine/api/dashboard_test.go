package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/enginetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is 09:00 in Asia/Shanghai, the zone the browser test runs in.
var t0 = time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)

const brokenRuleError = "weekly_report.lua:12: attempt to index a nil value (global 'peple')"

type fixture struct {
	fsm *engine.FSM
	rep *enginetest.Replicator
	api http.Handler
}

func (f *fixture) apply(t *testing.T, ct engine.CommandType, body any) any {
	t.Helper()
	return f.rep.MustApply(t, ct, body)
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
		Channels: []ChannelStatus{
			{Name: "wecom_sales", Plugin: "wecom", Healthy: true},
			{Name: "mock", Plugin: "mock", Healthy: false, Error: "plugin exited: signal: killed"},
		},
	}
}

// setup builds the API over an empty FSM with a stub status.
func setup(t *testing.T) *fixture {
	rep := enginetest.New()
	f := &fixture{fsm: rep.FSM, rep: rep}
	f.api = New(Config{FSM: f.fsm, Replicator: f.rep, StatusFunc: testStatus})
	return f
}

// populate fills the FSM as a day's work would: a planned run with one
// delivery sent, one failed (which raises an alert) and one pending; a
// skipped run (another alert); a late run; and an alert in Chinese.
func (f *fixture) populate(t *testing.T) {
	key := engine.RunKey("daily_report", t0)
	require.Nil(t, f.apply(t, engine.CmdStartRun, engine.StartRun{Key: key, Rule: "daily_report", Slot: t0, Zone: "Asia/Shanghai", Now: t0}))
	var nds []engine.NewDelivery
	for _, r := range []string{"zhangsan", "lisi", "wangwu"} {
		nds = append(nds, engine.NewDelivery{ID: engine.DeliveryID(key, r), Recipient: r, Channel: "wecom_sales",
			Payload:  json.RawMessage(`{"msgtype":"markdown","content":"**2026-12-01 日报** 请于今天 18:00 前提交"}`),
			Priority: engine.PriorityNormal, NotBefore: t0, Deadline: t0.Add(2 * time.Hour)})
	}
	nds[2].NotBefore = t0.Add(time.Hour) // wangwu: not due yet
	require.Equal(t, 3, f.apply(t, engine.CmdAddDeliveries, engine.AddDeliveries{RunKey: key, Deliveries: nds}))
	require.Nil(t, f.apply(t, engine.CmdFinishPlan, engine.FinishPlan{RunKey: key, Now: t0}))
	claimed := f.apply(t, engine.CmdClaim, engine.ClaimDeliveries{IDs: []string{nds[0].ID, nds[1].ID}, Leader: "n1",
		Now: t0.Add(time.Second), Timeout: 30 * time.Second}).(engine.ClaimResult).Claimed
	require.Len(t, claimed, 2)
	f.apply(t, engine.CmdRecordResults, engine.RecordResults{Leader: "n1", Now: t0.Add(2 * time.Second), Results: []engine.Result{
		{ID: nds[0].ID, Seq: claimed[0].Seq, Status: engine.OutcomeSent, ProviderID: "msg-001"},
		{ID: nds[1].ID, Seq: claimed[1].Seq, Status: engine.OutcomePermanent, Code: "81013", Error: "user not found in the app's visible range"},
	}})

	weekly := t0.Add(-24 * time.Hour)
	require.Nil(t, f.apply(t, engine.CmdStartRun, engine.StartRun{Key: engine.RunKey("weekly_report", weekly), Rule: "weekly_report",
		Slot: weekly, Skip: true, Now: t0}))
	birthday := t0.Add(-time.Hour)
	bkey := engine.RunKey("birthday", birthday)
	require.Nil(t, f.apply(t, engine.CmdStartRun, engine.StartRun{Key: bkey, Rule: "birthday", Slot: birthday, Late: true, Now: t0}))
	require.Nil(t, f.apply(t, engine.CmdFinishPlan, engine.FinishPlan{RunKey: bkey, Now: t0}))
	f.apply(t, engine.CmdRaiseAlert, engine.RaiseAlert{Cause: "channel:wecom_sales:token", Rule: "daily_report",
		Message: "企业微信 access_token 获取失败 (40001)：请检查 secret", Now: t0.Add(3 * time.Second)})
	require.Len(t, f.fsm.Alerts(), 3)

	res := f.apply(t, engine.CmdSubmitTask, engine.SubmitTask{Key: "enquiry-8812", Rule: "enquiry_timeout",
		DueAt: t0.Add(15 * time.Minute), Data: json.RawMessage(`{"customer":"王先生"}`), Now: t0})
	require.NotImplements(t, (*error)(nil), res)
}

func get(h http.Handler, method, target string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
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

// chromium finds a Chromium or Chrome binary for the browser test.
func chromium(t *testing.T) string {
	if p := os.Getenv("HERALD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const msg = "no Chromium found (install the Debian package chromium, or set HERALD_CHROMIUM)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + ": the browser test must run in CI")
	}
	t.Skip(msg)
	return ""
}

func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	f := setup(t)
	f.populate(t)
	srv := httptest.NewServer(f.api)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(bin),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		// This machine's network is closed: Chromium's own background
		// connections are refused and slow it down, so none may start.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("lang", "en-US"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900),
		chromedp.Env("TZ=Asia/Shanghai"),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	// Uncaught exceptions in the page fail the test.
	var (
		exMu       sync.Mutex
		exceptions []string
	)
	require.NoError(t, chromedp.Do(bctx)) // start the browser and open the tab
	go func() {
		for m, err := range chromedp.Console(bctx) {
			if err != nil {
				return
			}
			if m.IsException() {
				exMu.Lock()
				exceptions = append(exceptions, m.String())
				exMu.Unlock()
			}
		}
	}()

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#rules tr.error-row`)),
		chromedp.WaitVisible(chromedp.CSS(`#deliveries tr[data-delivery]`)),
		chromedp.WaitVisible(chromedp.CSS(`#alerts button[data-ack]`)),
		chromedp.WaitVisible(chromedp.CSS(`#runs tr`)),
	))
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return s
	}

	require.Contains(t, text("#banner"), "cn_workday knows statutory holidays up to 2027 only", "status warnings are shown")
	rules := text("#rules")
	require.Contains(t, rules, "last good version running")
	require.Contains(t, rules, brokenRuleError)
	require.Contains(t, text("#rules tr.error-row"), "weekly_report", "the broken rule is the one highlighted")
	cluster := text("#cluster")
	require.Contains(t, cluster, "you are here")
	require.Contains(t, cluster, "n3")
	require.Contains(t, text("#node"), "n1")
	require.Contains(t, text("#channels"), "unhealthy")
	require.Contains(t, text("#channels"), "plugin exited: signal: killed")
	deliveries := text("#deliveries")
	for _, s := range []string{"zhangsan", "lisi", "wangwu", "81013", "user not found"} {
		require.Contains(t, deliveries, s)
	}
	runs := text("#runs")
	require.Contains(t, runs, "skipped")
	require.Contains(t, runs, "late")
	require.Contains(t, text("#alerts"), "企业微信 access_token 获取失败")

	// Times are shown in the browser's zone, the RFC 3339 value in a tooltip.
	slot, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS(`#runs time[datetime^="2026-12-01T01:00:00"]`), "title"))
	require.NoError(t, err)
	require.Equal(t, "2026-12-01T01:00:00Z · Asia/Shanghai", slot.Value)
	require.Equal(t, "2026-12-01 09:00:00 +08:00", text(`#runs time[datetime^="2026-12-01T01:00:00"]`))

	// Tasks, and the day's statistics for the date picked.
	require.NoError(t, chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`#tasks tr[data-task="enquiry-8812"]`))))
	require.Contains(t, text("#tasks"), "enquiry_timeout")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Evaluate[chromedp.Void](`(s => { s.value = "2026-12-01"; s.dispatchEvent(new Event("change")); })(document.getElementById("s-date"))`),
		chromedp.WaitVisible(chromedp.CSS(`#stats table`)),
	))
	stats := text("#stats")
	require.Contains(t, stats, "daily_report")
	require.Contains(t, stats, "1 × code 81013", "failure reasons are listed")
	require.Contains(t, stats, "50%", "one sent, one failed")

	// The filter asks the API again.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Evaluate[chromedp.Void](`(s => { s.value = "failed"; s.dispatchEvent(new Event("change")); })(document.getElementById("f-state"))`),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#deliveries tr[data-delivery]").length === 1`, chromedp.WithPollingTimeout(5*time.Second)),
	))
	require.Contains(t, text("#deliveries"), "lisi")
	require.NotContains(t, text("#deliveries"), "zhangsan")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#deliveries tr[data-delivery]`)),
		chromedp.WaitVisible(chromedp.CSS(`#deliveries tr.detail`)),
	))
	detail := text("#deliveries tr.detail")
	require.Contains(t, detail, "2026-12-01 日报", "a row opens to its payload")
	require.Contains(t, detail, "deadline")
	require.Contains(t, detail, "2026-12-01 11:00:00")
	require.NotContains(t, text("body"), "[object", "nothing is rendered as a JS object's name")

	// An ack the API refuses shows the API's reason; the next one goes through.
	id := engine.AlertID("channel:wecom_sales:token")
	btn := chromedp.CSS(`#alerts button[data-ack="` + id + `"]`)
	f.rep.RefuseNext(1)
	require.NoError(t, chromedp.Do(bctx, chromedp.Click(btn), chromedp.WaitVisible(chromedp.CSS(`#alerts .ack-error`))))
	require.Contains(t, text(`#alerts .ack-error`), "no leader to take the write")
	require.NoError(t, chromedp.Do(bctx, chromedp.Click(btn),
		chromedp.WaitVisible(chromedp.CSS(`#alerts .card.acked[data-alert="`+id+`"]`))))
	require.Contains(t, text(`#alerts .card[data-alert="`+id+`"]`), "acknowledged")
	for _, a := range f.fsm.Alerts() {
		require.Equal(t, a.ID == id, a.Acked, a.Cause)
	}

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Evaluate[chromedp.Void](`(s => { s.value = ""; s.dispatchEvent(new Event("change")); })(document.getElementById("f-state"))`),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#deliveries tr[data-delivery]").length === 3`, chromedp.WithPollingTimeout(5*time.Second)),
	))
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	dir := os.Getenv("HERALD_SCREENSHOT_DIR") // keep the picture to look at it
	if dir == "" {
		dir = t.TempDir()
	}
	out := filepath.Join(dir, "dashboard.png")
	require.NoError(t, os.WriteFile(out, shot, 0o644))
	t.Logf("screenshot: %s", out)

	// Errors from the API are shown, not swallowed; a node whose API lacks
	// tasks and stats hides their panels.
	older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/tasks", "/v1/stats":
			writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
		case "/v1/status":
			writeError(w, http.StatusServiceUnavailable, "status is being rebuilt")
		case "/v1/runs":
			writeError(w, http.StatusInternalServerError, "runs index is corrupt")
		default:
			f.api.ServeHTTP(w, r)
		}
	}))
	defer older.Close()
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(older.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#banner`)),
		chromedp.WaitVisible(chromedp.CSS(`#runs-panel .err`)),
	))
	require.Contains(t, text("#banner"), "503: status is being rebuilt")
	require.Contains(t, text("#runs-panel .err"), "500: runs index is corrupt")
	for _, name := range []string{"tasks", "stats", "runs"} {
		hidden, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("`+name+`-panel").hidden`))
		require.NoError(t, err)
		require.Equal(t, name != "runs", hidden, name)
	}

	// A fresh node says so rather than showing blank tables.
	fresh := setup(t)
	fresh.api = New(Config{FSM: fresh.fsm, Replicator: fresh.rep, StatusFunc: func() Status {
		return Status{NodeID: "n1", State: "follower", Members: []MemberStatus{}, Rules: []RuleStatus{}, Channels: []ChannelStatus{}}
	}})
	freshSrv := httptest.NewServer(fresh.api)
	defer freshSrv.Close()
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(freshSrv.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#rules .empty`)),
		chromedp.WaitVisible(chromedp.CSS(`#deliveries .empty`)),
		chromedp.WaitVisible(chromedp.CSS(`#tasks .empty`)),
	))
	require.Contains(t, text("#rules"), "No rules loaded")
	require.Contains(t, text("#alerts"), "No alerts")
	require.Contains(t, text("#deliveries"), "No deliveries yet")
	require.Contains(t, text("#tiles"), "none", "no leader is shown as such")
	shot, err = chromedp.Run(bctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dashboard-empty.png"), shot, 0o644))

	exMu.Lock()
	defer exMu.Unlock()
	require.Empty(t, exceptions, "the page threw")
}

// Compile-time check that the stub satisfies the port.
