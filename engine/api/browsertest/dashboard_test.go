package browsertest

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/heraldtype"
)

func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.populate(t)
	// A kind the page has a title for but no sentence of its own (the
	// directory's alerts differ by subject): the engine's words, never a
	// bare template key.
	held := "directory refresh held for confirmation: it would remove 3 of 10 people"
	f.apply(t, engine.CmdRaiseAlert, engine.NewRaiseAlert(engine.ParseAlertCause(engine.AlertDirectoryHeld), "",
		engine.AlertParams{Count: 3}, held, t0.Add(4*time.Second)))
	srv := httptest.NewServer(f.api)
	defer srv.Close()

	b := newBrowser(t, "en-US", "Asia/Shanghai", 1440, 900)
	bctx := b.ctx

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#rules tr.error-row`)),
		chromedp.WaitVisible(chromedp.CSS(`#deliveries tr[data-delivery]`)),
		chromedp.WaitVisible(chromedp.CSS(`#alerts button[data-ack]`)),
		chromedp.WaitVisible(chromedp.CSS(`#runs tr`)),
	))
	text := func(sel string) string { t.Helper(); return b.text(t, sel) }

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
	require.Contains(t, text("#alerts"), held)
	require.NotContains(t, text("#alerts"), "alertx.")

	// Times are shown in the display zone with its offset, the RFC 3339
	// value in a tooltip.
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
	fresh.api = api.New(api.Config{FSM: fresh.fsm, Replicator: fresh.rep, StatusFunc: func() api.Status {
		return api.Status{NodeID: "n1", State: "follower", Members: []api.MemberStatus{}, Rules: []api.RuleStatus{}, Channels: []heraldtype.ChannelStatus{}}
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
}

// The day the console opens on is the cluster's today in the cluster's
// display zone: at 20:00 UTC on 2026-12-01 with display_timezone Etc/UTC
// that is 2026-12-01, though Shanghai (the page's default zone before
// status answers) is already on 12-02, and the browser's clock is 400
// days off.
func TestConsoleOpensOnTheClustersDay(t *testing.T) {
	t.Parallel()
	f := setup(t)
	status := func() api.Status { st := testStatus(); st.DisplayTimezone = "Etc/UTC"; return st }
	f.api = api.New(api.Config{FSM: f.fsm, Replicator: f.rep, StatusFunc: status, DisplayTimezone: "Etc/UTC",
		NowFunc: func() time.Time { return time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC) }})
	srv := httptest.NewServer(f.api)
	t.Cleanup(srv.Close)
	b := newBrowser(t, "en-US", "Asia/Shanghai", 1280, 800)
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Navigate(srv.URL+"/ui/"), b.until(`clock.synced`)))
	require.Equal(t, "2026-12-01", b.eval(t, `document.getElementById("s-date").value`))
	require.Equal(t, "2026-12-01", b.eval(t, `document.getElementById("p-date").value`))
}
