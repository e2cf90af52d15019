package reply

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestErrorBytes pins the envelope's bytes on the wire, the same the API
// and the cluster wrote each with their own map[string]string before:
// clients and users' scripts read them.
func TestErrorBytes(t *testing.T) {
	t.Parallel()
	reason := `no task <a & "b">`
	old := func(indent bool) string {
		rec := httptest.NewRecorder()
		enc := json.NewEncoder(rec.Body)
		if indent {
			enc.SetIndent("", "  ")
		}
		require.NoError(t, enc.Encode(map[string]string{"error": reason}))
		return rec.Body.String()
	}
	for _, indent := range []bool{false, true} {
		rec := httptest.NewRecorder()
		Error(rec, http.StatusNotFound, reason, indent)
		require.Equal(t, http.StatusNotFound, rec.Code)
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		require.Equal(t, old(indent), rec.Body.String())
	}
	rec := httptest.NewRecorder()
	Error(rec, http.StatusNotFound, reason, false)
	require.Equal(t, `{"error":"no task \u003ca \u0026 \"b\"\u003e"}`+"\n", rec.Body.String())
	rec = httptest.NewRecorder()
	Error(rec, http.StatusNotFound, "x", true)
	require.Equal(t, "{\n  \"error\": \"x\"\n}\n", rec.Body.String())

	var b Body
	require.NoError(t, json.Unmarshal([]byte(old(false)), &b))
	require.Equal(t, reason, b.Error)
}

// TestWithBytes: an envelope with fields is encoded as the maps the
// handlers built before (keys in order, the reason among them), and the
// reason cannot be replaced by a field.
func TestWithBytes(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	JSON(rec, http.StatusBadRequest, With("key: bad", map[string]any{"field": "key", "reason": "bad"}), false)
	require.Equal(t, `{"error":"key: bad","field":"key","reason":"bad"}`+"\n", rec.Body.String())

	rec = httptest.NewRecorder()
	JSON(rec, http.StatusConflict, With("taken", map[string]any{"error": "other", "task": map[string]int{"n": 1}}), false)
	require.Equal(t, `{"error":"taken","task":{"n":1}}`+"\n", rec.Body.String())

	rec = httptest.NewRecorder()
	JSON(rec, http.StatusConflict, With("taken", nil), false)
	require.Equal(t, `{"error":"taken"}`+"\n", rec.Body.String())
}
