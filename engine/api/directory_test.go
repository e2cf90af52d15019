package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/enginetest"
)

func TestDirectoryAPI(t *testing.T) {
	t.Parallel()
	n := enginetest.New()
	nodeHash, refreshed := "", 0
	b := &apiBundle{node: n, h: api.New(api.Config{Hosts: testHosts,
		FSM: n.FSM, Replicator: n, Rules: taskRules, NowFunc: func() time.Time { return now0 },
		StatusFunc: func() api.Status { return api.Status{} },
		Directory:  &api.DirectoryConfig{Configured: true, Hash: func() string { return nodeHash }, Refresh: func() { refreshed++ }},
	})}

	code, out := b.do(t, http.MethodGet, "/v1/directory", "")
	require.Equal(t, http.StatusOK, code)
	require.Nil(t, out["in_force"])
	require.Equal(t, true, out["in_sync"])
	code, _ = b.do(t, http.MethodGet, "/v1/directory/snapshot", "")
	require.Equal(t, http.StatusNotFound, code)

	b.apply(t, engine.CmdSetDirectory, engine.SetDirectory{Hash: "h1", Source: "wecom:x", Body: []byte(`{"source":"wecom:x","people":[]}`),
		UserIDs: []string{"a", "b", "c", "d"}, FetchedAt: now0, Now: now0})
	code, out = b.do(t, http.MethodGet, "/v1/directory", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "h1", out["in_force"].(map[string]any)["hash"])
	require.Equal(t, false, out["in_sync"], "the node's rules have not applied it yet")
	nodeHash = "h1"
	_, out = b.do(t, http.MethodGet, "/v1/directory", "")
	require.Equal(t, true, out["in_sync"])

	req := httptest.NewRequest(http.MethodGet, "/v1/directory/snapshot", nil)
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "h1", rec.Header().Get("X-Herald-Directory-Hash"))
	require.JSONEq(t, `{"source":"wecom:x","people":[]}`, rec.Body.String())

	code, _ = b.do(t, http.MethodPost, "/v1/directory/confirm", `{"hash":"h2"}`)
	require.Equal(t, http.StatusNotFound, code, "nothing held")
	b.apply(t, engine.CmdHoldDirectory, engine.HoldDirectory{Hash: "h2", Source: "wecom:x", Body: []byte(`{"source":"wecom:x","people":[]}`),
		UserIDs: []string{"a"}, Removed: []string{"b", "c", "d"}, FetchedAt: now0, Now: now0})
	_, out = b.do(t, http.MethodGet, "/v1/directory", "")
	held := out["held"].(map[string]any)
	require.Equal(t, float64(3), held["removed"])
	require.Equal(t, []any{"b", "c", "d"}, held["removed_sample"])
	code, _ = b.do(t, http.MethodPost, "/v1/directory/confirm", `{"hash":"h9"}`)
	require.Equal(t, http.StatusConflict, code, "another refresh is held")
	code, _ = b.do(t, http.MethodPost, "/v1/directory/confirm", `{"hash":"h2","extra":1}`)
	require.Equal(t, http.StatusBadRequest, code)

	n.RefuseNext(1)
	code, _ = b.do(t, http.MethodPost, "/v1/directory/confirm", `{"hash":"h2"}`)
	require.Equal(t, http.StatusServiceUnavailable, code, "no leader: retry")

	code, out = b.do(t, http.MethodPost, "/v1/directory/confirm", `{"hash":"h2","by":"ops"}`)
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, "h2", out["in_force"].(map[string]any)["hash"])
	require.Equal(t, "loopback", out["in_force"].(map[string]any)["confirmed_by"])
	require.Equal(t, "ops", out["in_force"].(map[string]any)["note"])
	require.Nil(t, out["held"])

	code, _ = b.do(t, http.MethodPost, "/v1/directory/refresh", "")
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, 1, refreshed)
}

// behindLog refuses every write as a leader does while a member runs a
// build older than the command.
type behindLog struct{ *enginetest.Replicator }

func (behindLog) Apply(context.Context, []byte) (any, error) {
	return nil, &engine.MembersBehindError{Command: engine.CmdConfirmDirectory, Need: 2, Behind: []string{"n2 (FSM version 1)"}}
}

func TestDirectoryConfirmWhileMembersBehind(t *testing.T) {
	t.Parallel()
	n := enginetest.New()
	b := &apiBundle{node: n, h: api.New(api.Config{Hosts: testHosts,
		FSM: n.FSM, Replicator: behindLog{n}, Rules: taskRules, NowFunc: func() time.Time { return now0 },
		StatusFunc: func() api.Status { return api.Status{} },
	})}
	code, out := b.do(t, http.MethodPost, "/v1/directory/confirm", `{"hash":"h2"}`)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, out["error"], "waiting for n2 (FSM version 1)")
	code, _ = b.do(t, http.MethodPost, "/v1/directory/refresh", "")
	require.Equal(t, http.StatusConflict, code, "no directory configured")
}

func TestDirectoryMetric(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	b.apply(t, engine.CmdSetDirectory, engine.SetDirectory{Hash: "h1", Source: "wecom:x", Body: []byte(`{}`),
		UserIDs: []string{"a", "b", "c"}, FetchedAt: now0, Now: now0})
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Contains(t, rec.Body.String(), `herald_directory_people{state="in_force"} 3`)
	require.Contains(t, rec.Body.String(), `herald_directory_people{state="held"} 0`)
}
