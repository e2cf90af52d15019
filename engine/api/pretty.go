package api

import "net/http"

// prettyWriter marks a response that asked for indented JSON (?pretty=1);
// writeJSON looks for it (isPretty).
type prettyWriter struct{ http.ResponseWriter }

func (prettyWriter) pretty() bool { return true }

// isPretty reports whether w asked for indented JSON.
func isPretty(w http.ResponseWriter) bool {
	p, ok := w.(interface{ pretty() bool })
	return ok && p.pretty()
}

// Unwrap lets http.ResponseController reach the real writer.
func (p prettyWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// prettyJSON hands handlers a prettyWriter when the query has pretty=1 (or
// true). Answers are compact otherwise.
func prettyJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.URL.Query().Get("pretty"); v == "1" || v == "true" {
			w = prettyWriter{w}
		}
		next.ServeHTTP(w, r)
	})
}
