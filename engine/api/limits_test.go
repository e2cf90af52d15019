package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/api"
)

// nested returns data whose innermost value sits levels containers deep
// (the data object is level 1): {"a":[[...[1]...]]}.
func nested(levels int) string {
	return `{"a":` + strings.Repeat("[", levels-1) + "1" + strings.Repeat("]", levels-1) + "}"
}

func taskBody(key, due, data string) string {
	b := `{"key":"` + key + `","rule":"enquiry_timeout","due_at":"` + due + `"`
	if data != "" {
		b += `,"data":` + data
	}
	return b + "}"
}

// Requests that cannot be delivered, or would cost the node far more than
// their size, are refused with 400 and the field, before the log.
func TestTaskInputThatCannotHurt(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	due := now0.Add(time.Hour).Format(time.RFC3339)
	cases := []struct {
		name, body, field, reason string
	}{
		{"data nested deeper than the rules accept", taskBody("k1", due, nested(api.MaxDataDepth+1)), "data.a" + strings.Repeat("[0]", api.MaxDataDepth-1), "nested deeper than 64"},
		{"the issue's 9,000 nested arrays", taskBody("k2", due, `{"x":`+strings.Repeat("[", 9000)+strings.Repeat("]", 9000)+`}`), "data.x" + strings.Repeat("[0]", api.MaxDataDepth-1), "nested deeper"},
		{"a number beyond float64", taskBody("k3", due, `{"n":1e400}`), "data.n", "not a finite 64-bit float"},
		{"a negative one", taskBody("k4", due, `{"deep":{"n":[-2e308]}}`), "data.deep.n[0]", "not a finite 64-bit float"},
		{"a huge string", taskBody("k5", due, `{"s":"`+strings.Repeat("x", 17<<10)+`"}`), "data.s", "longer than 16 KiB"},
		{"a huge key", taskBody("k6", due, `{"`+strings.Repeat("k", 300)+`":1}`), "data", "a key longer than 256 bytes"},
		{"a key twice", taskBody("k7", due, `{"a":1,"a":2}`), "data.a", "appears twice"},
		{"due years ago", taskBody("k8", "2019-01-01T09:00:00+08:00", ""), "due_at", "more than an hour in the past"},
		{"due 61 minutes ago", taskBody("k9", now0.Add(-61*time.Minute).Format(time.RFC3339), ""), "due_at", "more than an hour in the past"},
		{"a huge rule name", `{"key":"k10","rule":"` + strings.Repeat("r", 201) + `","due_at":"` + due + `"}`, "rule", "longer than 200 bytes"},
	}
	for _, c := range cases {
		code, out := b.do(t, http.MethodPost, "/v1/tasks", c.body)
		require.Equal(t, http.StatusBadRequest, code, "%s: %v", c.name, out)
		require.Equal(t, c.field, out["field"], c.name)
		require.Contains(t, out["reason"], c.reason, c.name)
	}
	require.Empty(t, b.node.FSM.Deliveries(nil), "nothing reached the log")

	// Right at the limits: accepted.
	for _, ok := range []string{
		taskBody("ok1", due, nested(api.MaxDataDepth)),
		taskBody("ok2", due, `{"n":1.7976931348623157e308,"m":-5e-324,"i":12345678901234567890}`),
		taskBody("ok3", now0.Add(-59*time.Minute).Format(time.RFC3339), ""),
		taskBody("ok4", due, `{"s":"`+strings.Repeat("x", 16<<10)+`","`+strings.Repeat("k", 256)+`":true}`),
	} {
		code, out := b.do(t, http.MethodPost, "/v1/tasks", ok)
		require.Equal(t, http.StatusCreated, code, "%.200s: %v", ok, out)
	}
}

// Data is stored canonically: keys sorted at every level, no spaces, the
// numbers' own text, no HTML escaping; the same data in another order is
// the same task.
func TestTaskDataCanonical(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	due := now0.Add(time.Hour).Format(time.RFC3339)
	code, out := b.do(t, http.MethodPost, "/v1/tasks", taskBody("c1", due, `{ "z": [3, {"y":1.50,"b":null}], "a": "<王>" , "m":{"k":true,"c":false}}`))
	require.Equal(t, http.StatusCreated, code, out)
	task, ok := b.node.FSM.Task("c1")
	require.True(t, ok)
	// (The log's JSON encoding escapes < and > in the stored bytes.)
	require.Equal(t, `{"a":"\u003c王\u003e","m":{"c":false,"k":true},"z":[3,{"b":null,"y":1.50}]}`, string(task.Data))
	code, out = b.do(t, http.MethodPost, "/v1/tasks", taskBody("c1", due, `{"m":{"c":false,"k":true},"a":"<王>","z":[3,{"b":null,"y":1.50}]}`))
	require.Equal(t, http.StatusOK, code, "the same task again: %v", out)
}

// Answers are compact unless ?pretty=1 asks for indentation.
func TestCompactAnswers(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	rec := b.send(t, http.MethodGet, "/v1/tasks", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, `{"tasks":[]}`+"\n", rec.Body.String())
	rec = b.send(t, http.MethodGet, "/v1/tasks?pretty=1", nil)
	require.Equal(t, "{\n  \"tasks\": []\n}\n", rec.Body.String())
}

// The error envelope's bytes, compact and on ?pretty=1, with fields beside
// the reason: clients and users' scripts read them (reply owns them).
func TestErrorEnvelopeBytes(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	rec := b.send(t, http.MethodGet, "/v1/tasks/nope", nil)
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Equal(t, `{"error":"no task nope"}`+"\n", rec.Body.String())
	rec = b.send(t, http.MethodGet, "/v1/tasks/nope?pretty=1", nil)
	require.Equal(t, "{\n  \"error\": \"no task nope\"\n}\n", rec.Body.String())
	rec = b.send(t, http.MethodPost, "/v1/tasks", strings.NewReader(`{"key":"a b","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`))
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.Equal(t, `{"error":"key: must not contain ' ' (it goes in URLs)","field":"key","reason":"must not contain ' ' (it goes in URLs)"}`+"\n", rec.Body.String())
}
