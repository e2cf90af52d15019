package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/enginetest"
)

// GET and PUT /v1/snapshot need admin: a backup holds the whole state,
// the audit trail included, and a restore replaces it. The restore is
// recorded once the handler answered (so its record is made after the
// state it replaced); a save is a read, and reads are not recorded.
func TestSnapshotNeedsAdminAndTheRestoreIsAudited(t *testing.T) {
	t.Parallel()
	n := enginetest.New()
	var recordsDuringRestore int
	snapshot := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			_, _ = io.Copy(io.Discard, r.Body)
			recordsDuringRestore = len(n.FSM.Audit(engine.AuditQuery{Limit: 10}).Records)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"index":7}`)
			return
		}
		_, _ = io.WriteString(w, "HERALD-BACKUP 1\n")
	})
	h := api.New(api.Config{Hosts: testHosts,
		FSM: n.FSM, Replicator: n, Rules: taskRules, NowFunc: func() time.Time { return now0 },
		StatusFunc: func() api.Status { return api.Status{NodeID: "n1"} }, Snapshot: snapshot, Tokens: testTokens,
	})
	call := func(method, token string) int {
		req := httptest.NewRequest(method, "/v1/snapshot", strings.NewReader("backup bytes"))
		req.RemoteAddr = "203.0.113.9:5000"
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, token := range []string{readSecret, operateSecret} {
		require.Equal(t, http.StatusForbidden, call(http.MethodGet, token))
		require.Equal(t, http.StatusForbidden, call(http.MethodPut, token))
	}
	require.Empty(t, n.FSM.Audit(engine.AuditQuery{Limit: 10}).Records, "refusals are not recorded")

	require.Equal(t, http.StatusOK, call(http.MethodGet, adminSecret))
	require.Empty(t, n.FSM.Audit(engine.AuditQuery{Limit: 10}).Records, "a save is a read")

	require.Equal(t, http.StatusOK, call(http.MethodPut, adminSecret))
	recs := n.FSM.Audit(engine.AuditQuery{Limit: 10}).Records
	require.Len(t, recs, 1)
	require.Zero(t, recordsDuringRestore, "recorded after the restore answered")
	require.Equal(t, []string{"root", "admin", "snapshot.restore"}, []string{recs[0].Actor, recs[0].Role, recs[0].Action})
}
