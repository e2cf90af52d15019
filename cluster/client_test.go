package cluster

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bigAnswer serves a JSON answer of about size bytes.
func bigAnswer(t *testing.T, size int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"blob": strings.Repeat("x", size)})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The API bounds a list answer at 4 MiB of items: a client the CLI uses
// must read such an answer whole (it cut it at 1 MiB and reported
// "unexpected end of JSON input").
func TestClientReadsAnswersUpToItsLimit(t *testing.T) {
	t.Parallel()
	srv := bigAnswer(t, 5<<20)
	var out map[string]string
	c := &Client{Addr: srv.URL, MaxResponse: 16 << 20}
	require.NoError(t, c.Do(context.Background(), http.MethodGet, "/v1/tasks", nil, &out))
	require.Len(t, out["blob"], 5<<20)
}

// Node-to-node calls keep a small bound (a member's status is a few KB):
// an answer over it is an error that says so, not a JSON error, and the
// rest of it is never read into memory.
func TestClientRefusesAnswersOverItsLimit(t *testing.T) {
	t.Parallel()
	srv := bigAnswer(t, 2<<20)
	var out map[string]string
	err := (&Client{Addr: srv.URL}).Do(context.Background(), http.MethodGet, "/v1/cluster/status", nil, &out)
	require.Error(t, err)
	require.Contains(t, err.Error(), "answer is over")
}
