package browsertest

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/enginetest"
)

// TestDashboardAsksForToken: on a node with tokens the page asks for one,
// keeps it for the tab (a reload does not ask again), sends it on every
// call, and asks again when it stops working.
func TestDashboardAsksForToken(t *testing.T) {
	t.Parallel()
	rep := enginetest.New()
	f := &fixture{fsm: rep.FSM, rep: rep}
	const readSecret, operateSecret, adminSecret = "dash-read-secret-000111", "dash-operate-secret-000222", "dash-admin-secret-000333"
	f.api = api.New(api.Config{FSM: f.fsm, Replicator: f.rep, StatusFunc: testStatus, Tokens: []api.Token{
		{Name: "wall", Role: api.RoleRead, Secret: readSecret}, {Name: "ops", Role: api.RoleOperate, Secret: operateSecret},
		{Name: "root", Role: api.RoleAdmin, Secret: adminSecret}}})
	f.populate(t)
	srv := httptest.NewServer(f.api)
	defer srv.Close()

	b := newBrowser(t, "en-US", "UTC", 1280, 800)
	bctx := b.ctx
	text := func(sel string) string { t.Helper(); return b.text(t, sel) }
	enter := func(tok string) {
		t.Helper()
		require.NoError(t, chromedp.Do(bctx,
			chromedp.WaitVisible(chromedp.CSS(`#token-dialog`)),
			chromedp.SendKeys(chromedp.CSS(`#token-input`), tok),
			chromedp.Click(chromedp.CSS(`#token-submit`)),
			chromedp.WaitNotVisible(chromedp.CSS(`#token-dialog`)),
		))
	}

	// First visit: the page asks, with the server's reason.
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#token-dialog`))))
	require.Contains(t, text("#token-reason"), "needs a token with role read")
	// A wrong token gets a 401: asked again, with the reason. Not enter:
	// the dialog may close and open again between two of WaitNotVisible's
	// looks, so the wait is for the new reason instead.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.CSS(`#token-input`), "wrong-token-value-xyz"),
		chromedp.Click(chromedp.CSS(`#token-submit`)),
		chromedp.Poll[chromedp.Void](`document.getElementById("token-reason").textContent.includes("unknown token")`, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.WaitVisible(chromedp.CSS(`#token-dialog`))))
	enter(readSecret)
	require.NoError(t, chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`#deliveries tr[data-delivery]`))))
	stored, err := chromedp.Run(bctx, chromedp.Evaluate[string](`sessionStorage.getItem("herald.token")`))
	require.NoError(t, err)
	require.Equal(t, readSecret, stored)

	// A read token is not offered the ack (status says the page's role);
	// the API would refuse it anyway (403, engine/api's auth tests).
	id := engine.AlertID("channel:wecom_sales:token")
	require.NoError(t, chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`#alerts [data-alert="`+id+`"]`))))
	require.NoError(t, chromedp.Do(bctx, chromedp.Poll[chromedp.Void](
		`document.querySelectorAll("#alerts button[data-ack]").length === 0`, chromedp.WithPollingTimeout(12*time.Second))),
		"no ack button for a read token")

	// A reload keeps the token (no dialog), and the data loads.
	require.NoError(t, chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#runs tr`))))
	open, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("token-dialog").open`))
	require.NoError(t, err)
	require.False(t, open)

	// The header button takes another token; an operate token acks.
	require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#sign-in`))))
	enter(operateSecret)
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#alerts button[data-ack="`+id+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#alerts .card.acked[data-alert="`+id+`"]`))))
	a, ok := f.fsm.Alert(id)
	require.True(t, ok)
	require.True(t, a.Acked)

	// The audit trail is an admin's: an operate token is not shown it; an
	// admin token sees the ack, under the name of the token that made it.
	hidden, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("audit-panel").hidden`))
	require.NoError(t, err)
	require.True(t, hidden, "no audit panel for an operate token")
	require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#sign-in`))))
	enter(adminSecret)
	require.NoError(t, chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`#audit tr[data-audit]`))))
	row := text(`#audit tr[data-audit]`)
	require.Contains(t, row, "ops")
	require.Contains(t, row, "alert.ack")
	require.Contains(t, row, id)
	require.NotContains(t, row, operateSecret)

	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(90))
	require.NoError(t, err)
	dir := os.Getenv("HERALD_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dashboard-token.png"), shot, 0o644))
}
