// Package reply writes Herald's JSON answers and owns the error envelope
// every Herald HTTP endpoint fails with, {"error": reason}: the API's and
// the cluster's alike, which cluster.Client, the CLI and users' scripts
// read. It imports only the standard library, so engine/api and cluster
// can both use it.
package reply

import (
	"encoding/json"
	"net/http"
)

// Body is the error envelope. Clients decode an error answer into it;
// answers that carry more beside the reason are built by With.
type Body struct {
	Error string `json:"error"`
}

// With is the envelope with fields beside the reason (the field at fault,
// the conflicting task). The reason is set last: a field named "error"
// cannot replace it.
func With(reason string, fields map[string]any) map[string]any {
	m := make(map[string]any, len(fields)+1)
	for k, v := range fields {
		m[k] = v
	}
	m["error"] = reason
	return m
}

// Error answers status with the envelope {"error": reason}; indent as
// for JSON.
func Error(w http.ResponseWriter, status int, reason string, indent bool) {
	JSON(w, status, Body{Error: reason}, indent)
}

// JSON answers status with v encoded by encoding/json (HTML characters
// escaped, a newline at the end), compact unless indent: an indented deep
// document is many times its compact size, so only a person asks for it.
func JSON(w http.ResponseWriter, status int, v any, indent bool) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	if indent {
		enc.SetIndent("", "  ")
	}
	_ = enc.Encode(v)
}
