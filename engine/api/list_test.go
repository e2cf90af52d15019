package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Lists are [] when empty, never null: a client iterating them (the
// dashboard, jq '.alerts[]') must not have to special-case a fresh node.
func TestEmptyListsAreArrays(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	for target, field := range map[string]string{
		"/v1/alerts": "alerts", "/v1/deliveries": "deliveries", "/v1/runs": "runs", "/v1/tasks": "tasks", "/v1/stats?date=2026-12-01": "rules",
	} {
		rec := httptest.NewRecorder()
		b.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		require.Equal(t, http.StatusOK, rec.Code, target)
		require.Contains(t, strings.Join(strings.Fields(rec.Body.String()), ""), `"`+field+`":[]`, target)
	}
}
