package buffered

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBufferedUntilSent: nothing reaches the client before Send; then the
// first status written and the whole body go, with their length.
func TestBufferedUntilSent(t *testing.T) {
	rec := httptest.NewRecorder()
	w := &Writer{ResponseWriter: rec}
	w.WriteHeader(http.StatusCreated)
	w.WriteHeader(http.StatusInternalServerError) // the first one stands
	_, _ = w.Write([]byte(`{"ok":`))
	_, _ = w.Write([]byte(`true}`))
	require.Empty(t, rec.Body.String())
	require.Equal(t, http.StatusCreated, w.Status())
	w.Send()
	require.Equal(t, http.StatusCreated, rec.Code)
	require.Equal(t, `{"ok":true}`, rec.Body.String())
	require.Equal(t, "11", rec.Header().Get("Content-Length"))
	require.True(t, rec.Flushed)

	bare := &Writer{ResponseWriter: httptest.NewRecorder()}
	_, _ = bare.Write([]byte("x"))
	require.Equal(t, http.StatusOK, bare.Status(), "a write without a status is a 200")
}

// An informational status (a forwarding proxy passes the leader's
// "100 Continue" on to a client that sent Expect: 100-continue, as curl
// does for a body over 1 KB) is not the answer: the final status is kept.
func TestInformationalStatusIsNotTheAnswer(t *testing.T) {
	rec := httptest.NewRecorder()
	w := &Writer{ResponseWriter: rec}
	w.WriteHeader(http.StatusContinue)
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write([]byte(`{"error":"no"}`))
	require.Equal(t, http.StatusBadRequest, w.Status())
	w.Send()
	require.Equal(t, http.StatusBadRequest, rec.Code)
}
