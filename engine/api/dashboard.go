package api

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// The operator dashboard is plain files: HTML, CSS and one vanilla JS file
// that polls the JSON API. No build step and no CDN, because Herald nodes
// often run where there is no internet.
//
//go:embed web
var webFiles embed.FS

// dashboardTypes are the content types of the dashboard's assets. They are
// fixed here rather than taken from the mime package, whose answers depend
// on the MIME tables installed on the host.
var dashboardTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// dashboardCSP keeps the page to its own origin: no inline script, no
// outside fetches. Icons are data: URLs.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type asset struct {
	body  []byte
	ctype string
	etag  string
}

// dashboard serves the operator's web page under /ui/. Assets are not
// fingerprinted, so they are served with "no-cache" and a content-hash
// ETag: the browser revalidates on every load and gets a 304 until the
// binary changes, and an upgrade is never hidden behind a stale cache.
func dashboard() http.Handler {
	assets := loadAssets()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/ui/")
		if name == "" {
			name = "index.html"
		}
		a, ok := assets[name]
		if !ok {
			writeError(w, http.StatusNotFound, "no such dashboard file: "+r.URL.Path)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if strings.HasSuffix(name, ".html") {
			h.Set("Content-Security-Policy", dashboardCSP)
		}
		// ServeContent answers If-None-Match with 304 and handles HEAD and
		// ranges; the zero modtime leaves Last-Modified out.
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}

// loadAssets reads the embedded files once. Only files with a known type
// are served; anything else under web/ stays private.
func loadAssets() map[string]asset {
	out := map[string]asset{}
	err := fs.WalkDir(webFiles, "web", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ctype, ok := dashboardTypes[path.Ext(p)]
		if !ok {
			return nil
		}
		body, err := webFiles.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		out[strings.TrimPrefix(p, "web/")] = asset{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		// The files are compiled in; failing to read them is a broken build.
		panic("herald: embedded dashboard: " + err.Error())
	}
	return out
}
