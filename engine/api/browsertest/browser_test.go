package browsertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// browser is one headless Chromium for a test, failing the test if the
// page throws.
type browser struct {
	ctx        context.Context
	mu         sync.Mutex
	exceptions []string
}

// newBrowser starts Chromium with the given Accept-Language (which also
// sets navigator.languages), time zone and window size. The page must not
// lean on the browser's zone: tests run it in UTC and in another one.
func newBrowser(t *testing.T, lang, zone string, w, h int) *browser {
	bin := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
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
		chromedp.Flag("lang", lang),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(w, h),
		chromedp.Env("TZ="+zone),
	)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	b := &browser{ctx: bctx}
	_, err := chromedp.Call(bctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{
		UserAgent: "Mozilla/5.0 (X11; Linux x86_64) HeraldTest", AcceptLanguage: lang})
	require.NoError(t, err)
	// The browser's clock runs 400 days and 13 hours away from the wall
	// clock (and so from the nodes' fixed clocks): a page that took "today"
	// from the browser instead of the cluster fails here every day, not
	// only on the days the wall clock leaves the fixture's.
	_, err = chromedp.Call(bctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: skewedDate})
	require.NoError(t, err)
	go func() {
		for m, err := range chromedp.Console(bctx) {
			if err != nil {
				return
			}
			if m.IsException() {
				b.mu.Lock()
				b.exceptions = append(b.exceptions, m.String())
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		require.Empty(t, b.exceptions, "the page threw")
	})
	return b
}

// skewedDate moves the page's Date (new Date(), Date.now()) by a fixed
// offset; dates built from a value stay as they are.
const skewedDate = `(() => {
  const off = (400 * 24 + 13) * 3600 * 1000;
  const Real = Date;
  class Skewed extends Real {
    constructor(...a) { if (a.length === 0) super(Real.now() + off); else super(...a); }
    static now() { return Real.now() + off; }
  }
  globalThis.Date = Skewed;
})();`

// until is an action that waits, up to 20 s, until js is true in the
// page, asking every 50 ms.
func (b *browser) until(js string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			ok, err := chromedp.Evaluate[bool]("!!("+js+")")(ctx, tg)
			if err == nil && ok {
				return chromedp.Void{}, nil
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, fmt.Errorf("waiting for %s: %w (last error: %v)", js, ctx.Err(), err)
			case <-tick.C:
			}
		}
	}
}

func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t, err, sel)
	return s
}
