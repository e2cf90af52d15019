package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
)

func TestEventsAPI(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	body := `{"id":"crm-1","type":"enquiry.replied","data":{"customer":"c1"}}`
	code, out := b.do(t, http.MethodPost, "/v1/events", body)
	require.Equal(t, http.StatusAccepted, code, out)
	require.Equal(t, "api", out["source"])
	code, out = b.do(t, http.MethodPost, "/v1/events", body)
	require.Equal(t, http.StatusOK, code, "the same id again: nothing new")
	require.False(t, out["handled"].(bool))
	require.Len(t, b.node.FSM.UnhandledEvents(10), 1)

	code, _ = b.do(t, http.MethodGet, "/v1/events/crm-1", "")
	require.Equal(t, http.StatusOK, code)
	code, out = b.do(t, http.MethodPost, "/v1/events", `{"type":"x"}`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "id", out["field"])
	code, _ = b.do(t, http.MethodPost, "/v1/events", `{"id":"a","type":"x","data":[1]}`)
	require.Equal(t, http.StatusBadRequest, code)
	code, _ = b.do(t, http.MethodPost, "/v1/events", `{"id":"a","type":"x","data":{"big":"`+strings.Repeat("x", 70<<10)+`"}}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
}

func TestReplaceTaskAPI(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	code, out := b.do(t, http.MethodPost, "/v1/tasks", `{"key":"enq-1","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00","data":{"a":1}}`)
	require.Equal(t, http.StatusCreated, code, out)
	code, out = b.do(t, http.MethodPut, "/v1/tasks/enq-1", `{"due_at":"2026-12-01T10:45:00+08:00"}`)
	require.Equal(t, http.StatusOK, code, out)
	due, err := time.Parse(time.RFC3339, out["due_at"].(string))
	require.NoError(t, err)
	require.True(t, due.Equal(time.Date(2026, 12, 1, 2, 45, 0, 0, time.UTC)), due)
	require.Equal(t, map[string]any{"a": float64(1)}, out["data"])
	code, out = b.do(t, http.MethodPut, "/v1/tasks/enq-1", `{"data":{"a":2}}`)
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, map[string]any{"a": float64(2)}, out["data"])

	code, _ = b.do(t, http.MethodPut, "/v1/tasks/enq-1", `{}`)
	require.Equal(t, http.StatusBadRequest, code)
	code, _ = b.do(t, http.MethodPut, "/v1/tasks/nope", `{"due_at":"2026-12-01T10:45:00+08:00"}`)
	require.Equal(t, http.StatusNotFound, code)
	b.do(t, http.MethodDelete, "/v1/tasks/enq-1", "")
	code, out = b.do(t, http.MethodPut, "/v1/tasks/enq-1", `{"due_at":"2026-12-01T10:45:00+08:00"}`)
	require.Equal(t, http.StatusConflict, code, out)
	require.Contains(t, out["error"], "cancelled")

	recs := b.node.FSM.Audit(engine.AuditQuery{Limit: 10}).Records
	var actions []string
	for _, r := range recs {
		actions = append(actions, r.Action)
	}
	require.Contains(t, actions, "task.replace")
}

// The callback route is public, even with tokens, and from any address.
func TestWecomCallbackIsPublic(t *testing.T) {
	t.Parallel()
	called := 0
	h := api.New(api.Config{StatusFunc: func() api.Status { return api.Status{} }, Tokens: []api.Token{{Name: "ops", Role: api.RoleOperate, Secret: "s3cret-s3cret-s3cret"}},
		WecomCallback: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			called++
			require.Equal(t, "wecom", r.PathValue("channel"))
			w.WriteHeader(http.StatusOK)
		})})
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		req := httptest.NewRequest(m, "/v1/wecom/callback/wecom?msg_signature=x&timestamp=1&nonce=n", strings.NewReader("<xml/>"))
		req.RemoteAddr = "203.0.113.5:4000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	}
	require.Equal(t, 2, called)
}
