package api

import "net/http"

// dashboard serves the operator's web page under /ui/.
func dashboard() http.Handler {
	return http.StripPrefix("/ui", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><title>Herald</title><p>Herald: see <a href=\"/v1/status\">/v1/status</a>"))
	}))
}
