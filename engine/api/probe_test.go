package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/enginetest"
)

// The probes answer without a token while tokens are configured, from any
// address, with small bodies that name no address or token; /v1/ready
// says which checks passed and answers 503 until all do.
func TestProbesArePublic(t *testing.T) {
	t.Parallel()
	n := enginetest.New()
	var rd api.Readiness
	h := api.New(api.Config{
		FSM: n.FSM, Replicator: n, Rules: taskRules, NowFunc: func() time.Time { return now0 },
		StatusFunc: func() api.Status { return api.Status{NodeID: "n1"} }, Tokens: testTokens,
		ReadyFunc: func(context.Context) api.Readiness { return rd },
	})
	call := func(method, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		req.RemoteAddr = "10.1.2.3:40000" // a kubelet: not loopback, no token
		req.Host = "10.1.2.9:8101"        // the pod's IP, as Kubernetes probes send it
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := call(http.MethodGet, "/v1/health")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"status":"ok"}`, rec.Body.String())
	require.Equal(t, http.StatusOK, call(http.MethodHead, "/v1/health").Code)
	require.Equal(t, http.StatusUnauthorized, call(http.MethodGet, "/v1/status").Code, "the rest still needs a token")

	rd = api.Readiness{Checks: api.ReadyChecks{Member: true, Leader: true, Rules: true, Channels: true},
		Reasons: []string{"caught_up: applied index 10 is 5000 behind the leader's 5010 (at most 1000)"}}
	rec = call(http.MethodGet, "/v1/ready")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"ready":false,"checks":{"member":true,"leader":true,"caught_up":false,"rules":true,"channels":true},
		"reasons":["caught_up: applied index 10 is 5000 behind the leader's 5010 (at most 1000)"]}`, rec.Body.String())
	require.Equal(t, http.StatusServiceUnavailable, call(http.MethodHead, "/v1/ready").Code)

	rd = api.Readiness{Checks: api.ReadyChecks{Member: true, Leader: true, CaughtUp: true, Rules: true, Channels: true}}
	rec = call(http.MethodGet, "/v1/ready")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var got api.Readiness
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	require.True(t, got.Ready)
	require.Empty(t, got.Reasons)

	rd.Ready = true // a ReadyFunc's own verdict does not count: the checks do
	rd.Checks.Leader = false
	require.Equal(t, http.StatusServiceUnavailable, call(http.MethodGet, "/v1/ready").Code)
	require.Equal(t, http.StatusUnauthorized, call(http.MethodPost, "/v1/ready").Code, "only GET and HEAD are public")
}

// Without tokens, a request whose Host is not this node's name is
// refused (DNS rebinding); a probe sends the pod's IP and is answered.
func TestProbesPassTheHostCheck(t *testing.T) {
	t.Parallel()
	ready := api.Readiness{Checks: api.ReadyChecks{Member: true, Leader: true, CaughtUp: true, Rules: true, Channels: true}}
	h := api.New(api.Config{StatusFunc: func() api.Status { return api.Status{} },
		ReadyFunc: func(context.Context) api.Readiness { return ready }})
	call := func(path string) int {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr, req.Host = "10.1.2.3:40000", "10.1.2.9:8101"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusOK, call("/v1/health"))
	require.Equal(t, http.StatusOK, call("/v1/ready"))
	require.Equal(t, http.StatusForbidden, call("/v1/status"), "the rest: refused under a foreign Host")
	require.Equal(t, http.StatusForbidden, call("/ui/"))
}

// A node without a ReadyFunc is never ready.
func TestReadyWithoutReadyFunc(t *testing.T) {
	t.Parallel()
	h := api.New(api.Config{StatusFunc: func() api.Status { return api.Status{} }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/ready", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Contains(t, rec.Body.String(), "reports no readiness")
}
