package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine"
	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/enginetest"
)

func auditOf(t *testing.T, b *apiBundle, query string) api.AuditResponse {
	t.Helper()
	rec := b.call(http.MethodGet, "/v1/audit"+query, "", "203.0.113.1:1", adminSecret)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var out api.AuditResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	return out
}

// Every accepted write leaves one record naming the token (never the
// secret), the client, the action, the target and the status; reads and
// refused writes leave none.
func TestWritesAreAudited(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, testTokens)
	const remote = "203.0.113.9:5000"
	task := `{"key":"enq-1","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`
	b.node.MustApply(t, engine.CmdRaiseAlert, engine.RaiseAlert{Cause: "skipped:daily", Message: "m", Now: now0})
	alertID := engine.AlertID("skipped:daily")

	writes := []struct {
		method, target, body, token string
		want                        int
		actor, action, what         string
	}{
		{http.MethodPost, "/v1/tasks", task, operateSecret, http.StatusCreated, "ops", "task.submit", "enq-1"},
		{http.MethodDelete, "/v1/tasks/enq-1", "", operateSecret, http.StatusOK, "ops", "task.cancel", "enq-1"},
		{http.MethodPost, "/v1/alerts/" + alertID[:8] + "/ack", "", adminSecret, http.StatusOK, "root", "alert.ack", alertID},
		{http.MethodPost, "/v1/rules/daily/pause", `{"reason":"migration"}`, operateSecret, http.StatusOK, "ops", "rule.pause", "daily"},
		{http.MethodPost, "/v1/rules/daily/resume", "", operateSecret, http.StatusOK, "ops", "rule.resume", "daily"},
		{http.MethodPost, "/v1/rules/daily/fire", `{"slot":"2026-12-01T09:00:00+08:00"}`, operateSecret, http.StatusCreated, "ops", "rule.fire", "daily@2026-12-01T01:00:00Z"},
		{http.MethodPost, "/v1/cluster/join", `{"id":"n4","raft_addr":"a","http_addr":"b"}`, adminSecret, http.StatusOK, "root", "cluster.join", "n4"},
		{http.MethodPost, "/v1/cluster/remove", `{"id":"n3"}`, adminSecret, http.StatusOK, "root", "cluster.remove", "n3"},
	}
	for i, w := range writes {
		rec := b.call(w.method, w.target, w.body, remote, w.token)
		require.Equal(t, w.want, rec.Code, "%s %s: %s", w.method, w.target, rec.Body.String())
		got := auditOf(t, b, "?limit=1")
		require.Len(t, got.Records, 1)
		r := got.Records[0]
		require.Equal(t, uint64(i+1), r.Seq, "%s %s: one record per write", w.method, w.target)
		require.Equal(t, w.actor, r.Actor)
		require.Equal(t, "203.0.113.9", r.Remote)
		require.Equal(t, w.action, r.Action)
		require.Equal(t, w.what, r.Target)
		require.Equal(t, w.want, r.Status)
		require.Empty(t, r.Via)
		require.True(t, r.At.Equal(now0), "stamped by the node that performed it: %s", r.At)
	}
	n := len(writes)

	// Reads, and writes refused for any reason, leave nothing.
	for _, c := range []struct {
		method, target, body, token string
		want                        int
	}{
		{http.MethodGet, "/v1/tasks", "", readSecret, http.StatusOK},
		{http.MethodGet, "/v1/tasks/enq-1", "", readSecret, http.StatusOK},
		{http.MethodGet, "/v1/cluster/status", "", readSecret, http.StatusOK},
		{http.MethodPost, "/v1/tasks", task, "", http.StatusUnauthorized},
		{http.MethodPost, "/v1/tasks", task, "wrong-token", http.StatusUnauthorized},
		{http.MethodPost, "/v1/tasks", task, readSecret, http.StatusForbidden},
		{http.MethodPost, "/v1/cluster/remove", `{"id":"n2"}`, operateSecret, http.StatusForbidden},
		{http.MethodPost, "/v1/tasks", `{"key":"x"}`, operateSecret, http.StatusBadRequest},
		{http.MethodDelete, "/v1/tasks/nope", "", operateSecret, http.StatusNotFound},
		{http.MethodPost, "/v1/rules/daily/resume", "", operateSecret, http.StatusConflict},
	} {
		rec := b.call(c.method, c.target, c.body, remote, c.token)
		require.Equal(t, c.want, rec.Code, "%s %s: %s", c.method, c.target, rec.Body.String())
	}
	require.Equal(t, n, b.node.FSM.AuditLen(), "reads and refusals are not recorded")
	metrics := b.call(http.MethodGet, "/metrics", "", remote, readSecret).Body.String()
	for _, line := range []string{`herald_api_refused_total{code="401"} 2`, `herald_api_refused_total{code="403"} 2`,
		`herald_api_refused_total{code="400"} 1`, `herald_api_refused_total{code="404"} 1`, `herald_api_refused_total{code="409"} 1`} {
		require.Contains(t, metrics, line, "refusals are counted instead, the auth's too")
	}
}

// The trail tells who holds which token and where they work from: admin
// only.
func TestAuditNeedsAdmin(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, testTokens)
	for token, want := range map[string]int{"": 401, readSecret: 403, operateSecret: 403, adminSecret: 200} {
		rec := b.call(http.MethodGet, "/v1/audit", "", "203.0.113.9:5000", token)
		require.Equal(t, want, rec.Code, rec.Body.String())
	}
}

func TestAuditPagesNewestFirst(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, testTokens)
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		token := operateSecret
		if k == "c" {
			token = adminSecret
		}
		rec := b.call(http.MethodPost, "/v1/tasks", `{"key":"`+k+`","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`, "203.0.113.9:5000", token)
		require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	}
	var keys []string
	cursor := ""
	for range 5 {
		page := auditOf(t, b, "?limit=2&cursor="+cursor)
		require.Equal(t, api.DefaultDisplayTimezone, page.Timezone, "the zone of every time, said")
		for _, r := range page.Records {
			_, off := r.At.Zone()
			require.Equal(t, 8*3600, off, "times in the display zone")
		}
		for _, r := range page.Records {
			keys = append(keys, r.Target)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	require.Equal(t, []string{"e", "d", "c", "b", "a"}, keys)
	require.Equal(t, []string{"c"}, targets(auditOf(t, b, "?actor=root")))
	require.Len(t, auditOf(t, b, "?action=task.submit&since=2026-12-01T02:00:00Z").Records, 5)
	require.Empty(t, auditOf(t, b, "?since=2026-12-01T02:00:01Z").Records)
	for _, q := range []string{"?limit=0", "?limit=1001", "?cursor=x", "?since=yesterday"} {
		rec := b.call(http.MethodGet, "/v1/audit"+q, "", "203.0.113.9:5000", adminSecret)
		require.Equal(t, http.StatusBadRequest, rec.Code, q)
	}
}

func targets(p api.AuditResponse) []string {
	var out []string
	for _, r := range p.Records {
		out = append(out, r.Target)
	}
	return out
}

// Tokens never reach the trail: not in a record, not in an answer.
func TestAuditHoldsNoSecrets(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, testTokens)
	for _, token := range []string{operateSecret, adminSecret} {
		rec := b.call(http.MethodPost, "/v1/tasks", `{"key":"k-`+token[:3]+`","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`, "203.0.113.9:5000", token)
		require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	}
	rec := b.call(http.MethodPost, "/v1/cluster/remove", `{"id":"n3"}`, "203.0.113.9:5000", adminSecret)
	require.Equal(t, http.StatusOK, rec.Code)
	records, err := json.Marshal(b.node.FSM.Audit(engine.AuditQuery{Limit: 100}))
	require.NoError(t, err)
	answer := b.call(http.MethodGet, "/v1/audit?pretty=1", "", "203.0.113.9:5000", adminSecret).Body.String()
	metrics := b.call(http.MethodGet, "/metrics", "", "203.0.113.9:5000", adminSecret).Body.String()
	for _, secret := range []string{readSecret, operateSecret, adminSecret} {
		require.NotContains(t, string(records), secret)
		require.NotContains(t, answer, secret)
		require.NotContains(t, metrics, secret)
	}
	require.Contains(t, answer, `"actor": "ops"`)
	require.Contains(t, answer, `"actor": "root"`)
}

func TestWithoutTokensLoopbackIsTheActor(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, nil)
	rec := b.call(http.MethodPost, "/v1/tasks", `{"key":"k","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`, "127.0.0.1:5000", "")
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	r := b.node.FSM.Audit(engine.AuditQuery{Limit: 1}).Records[0]
	require.Equal(t, []string{"loopback", "admin", "127.0.0.1", "task.submit", "k"}, []string{r.Actor, r.Role, r.Remote, r.Action, r.Target})
}

// failAudit refuses audit records only: the write they follow must still
// be answered as it was, and the failure shows in the metrics.
type failAudit struct{ *enginetest.Replicator }

func (f failAudit) Apply(ctx context.Context, cmd []byte) (any, error) {
	if engine.CommandType(cmd[0]) == engine.CmdRecordAudit {
		return nil, errors.New("disk full")
	}
	return f.Replicator.Apply(ctx, cmd)
}

func TestAuditFailureDoesNotFailTheWrite(t *testing.T) {
	t.Parallel()
	n := enginetest.New()
	h := api.New(api.Config{Hosts: testHosts, FSM: n.FSM, Replicator: failAudit{n}, Rules: taskRules, NowFunc: func() time.Time { return now0 },
		StatusFunc: func() api.Status { return api.Status{} }, Tokens: testTokens, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	b := &apiBundle{node: n, h: h}
	rec := b.call(http.MethodPost, "/v1/tasks", `{"key":"k","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`, "203.0.113.9:5000", operateSecret)
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	_, ok := n.FSM.Task("k")
	require.True(t, ok)
	require.Zero(t, n.FSM.AuditLen())
	metrics := b.call(http.MethodGet, "/metrics", "", "203.0.113.9:5000", readSecret).Body.String()
	require.Contains(t, metrics, "herald_audit_failures_total 1")
}

// fakeForwarding plays the cluster: a request carrying X-Test-Vouch was
// forwarded by n2, which vouched for the caller it names; a response with
// X-Test-Forwarded was produced by the leader.
type fakeForwarding struct{}

func (f fakeForwarding) Vouch(r *http.Request, caller string) { r.Header.Set("X-Test-Caller", caller) }
func (f fakeForwarding) Vouched(r *http.Request) (string, string, bool) {
	if c := r.Header.Get("X-Test-Vouch"); c != "" {
		return c, "n2", true
	}
	if r.Header.Get("X-Test-Unsigned") != "" {
		return "", "n2", false
	}
	return "", "", false
}
func (f fakeForwarding) Forwarded(h http.Header) bool { return h.Get("X-Test-Forwarded") != "" }

// A write forwarded by a member that vouches for its caller is recorded
// with the client's address and the member it came through; without
// tokens, the member's verdict (loopback) holds. One that proves nothing
// is refused, saying what would help. The follower records nothing: the
// leader did.
func TestForwardedWritesAreAuditedAsTheClient(t *testing.T) {
	t.Parallel()
	n := enginetest.New()
	forwarded := false
	cluster := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) })
	fwd := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if forwarded && r.Method != http.MethodGet {
				w.Header().Set("X-Test-Forwarded", "n1")
				w.WriteHeader(http.StatusCreated)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	h := api.New(api.Config{Hosts: testHosts, FSM: n.FSM, Replicator: n, Rules: taskRules, NowFunc: func() time.Time { return now0 }, Cluster: cluster,
		StatusFunc: func() api.Status { return api.Status{} }, Forwarding: fakeForwarding{}, ForwardFunc: fwd})
	body := `{"key":"k","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`
	send := func(hdr, val string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/tasks", strings.NewReader(body))
		req.RemoteAddr = "10.0.0.2:40000" // the follower's address
		req.Header.Set(hdr, val)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := send("X-Test-Unsigned", "1")
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Contains(t, errorOf(t, rec), "cluster_secret", "says what would let the follower vouch")
	require.Contains(t, errorOf(t, rec), "forwarded by n2")

	rec = send("X-Test-Vouch", "actor=loopback&role=admin&remote=127.0.0.1")
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	r := n.FSM.Audit(engine.AuditQuery{Limit: 1}).Records[0]
	require.Equal(t, []string{"loopback", "127.0.0.1", "n2"}, []string{r.Actor, r.Remote, r.Via})

	forwarded = true // now this node is the follower
	rec = send("X-Unused", "1")
	require.Equal(t, http.StatusUnauthorized, rec.Code, "not loopback, nothing vouched")
	req := httptest.NewRequest(http.MethodPost, "/v1/tasks", strings.NewReader(body))
	req.RemoteAddr = "127.0.0.1:5000"
	rec2 := httptest.NewRecorder()
	h.ServeHTTP(rec2, req)
	require.Equal(t, http.StatusCreated, rec2.Code)
	require.Equal(t, 1, n.FSM.AuditLen(), "the follower leaves the record to the leader")
	require.Equal(t, "actor=loopback&remote=127.0.0.1&role=admin", req.Header.Get("X-Test-Caller"), "it vouches for its caller")
}

// Every write route names its audit action: a new POST without one would
// still be recorded (by method and path), but as a thing nobody can filter.
func TestEveryWriteRouteNamesItsAction(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("server.go")
	require.NoError(t, err)
	route := regexp.MustCompile(`mux\.Handle(?:Func)?\("(POST|PUT|PATCH|DELETE) [^"]+", (.*)\)\n`)
	found := route.FindAllStringSubmatch(string(src), -1)
	require.NotEmpty(t, found)
	for _, m := range found {
		require.True(t, strings.HasPrefix(m[2], "audited("), "%s: wrap it in audited(action, …)", strings.TrimSpace(m[0]))
	}
}

// A target is bounded whatever the path held, so the trail's memory is
// bounded by its count.
func TestAuditTargetIsBounded(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, testTokens)
	long := strings.Repeat("ü", 400) // 800 bytes, no task key is this long
	rec := b.call(http.MethodPost, "/v1/cluster/remove", `{"id":"`+long+`"}`, "203.0.113.9:5000", adminSecret)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	r := b.node.FSM.Audit(engine.AuditQuery{Limit: 1}).Records[0]
	require.LessOrEqual(t, len(r.Target), 256)
	require.True(t, strings.HasSuffix(r.Target, "…"))
	require.True(t, utf8.ValidString(r.Target))
}

// Issue 19: an operate token acking an acked alert again and again (each
// answered 200) pushed every earlier record past engine.AuditCap. The
// repeats now fold into one record that counts them, so the earlier
// records stay; on the code before, each repeat was a record of its own.
func TestRepeatedNoopWritesDoNotFlushTheTrail(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, testTokens)
	const remote = "203.0.113.9:5000"
	b.node.MustApply(t, engine.CmdRaiseAlert, engine.RaiseAlert{Cause: "skipped:daily", Message: "m", Now: now0})
	alertID := engine.AlertID("skipped:daily")
	task := `{"key":"enq-1","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`
	require.Equal(t, http.StatusCreated, b.call(http.MethodPost, "/v1/tasks", task, remote, operateSecret).Code)
	require.Equal(t, http.StatusOK, b.call(http.MethodPost, "/v1/alerts/"+alertID+"/ack", "", remote, adminSecret).Code)
	// 100,000 in the FSM's own test (engine TestUnchangedWritesDoNotFlushTheTrail);
	// here enough to show each kind of repeat folds.
	n := 3000
	if raceEnabled {
		n = 500
	}
	for i := range n {
		rec := b.call(http.MethodPost, "/v1/alerts/"+alertID+"/ack", "", remote, operateSecret)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		rec = b.call(http.MethodPost, "/v1/tasks", task, remote, operateSecret) // the same task again
		require.Equal(t, http.StatusOK, rec.Code, "%d: %s", i, rec.Body.String())
	}
	require.Equal(t, 4, b.node.FSM.AuditLen(), "the two writes, and one record per kind of repeat")
	got := auditOf(t, b, "")
	require.Len(t, got.Records, 4)
	require.Equal(t, "task.submit", got.Records[3].Action, "the first record is still there")
	require.False(t, got.Records[3].Unchanged)
	for _, r := range got.Records[:2] {
		require.Equal(t, "ops", r.Actor)
		require.True(t, r.Unchanged, "%+v", r)
		require.Equal(t, uint64(n-1), r.Repeats, "%s: the repeats are counted", r.Action)
	}
}
