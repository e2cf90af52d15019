package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/engine/api"
	"github.com/heraldhq/herald/engine/enginetest"
)

const (
	readSecret    = "r3ad-s3cret-value-0001"
	operateSecret = "0perate-s3cret-value-0002"
	adminSecret   = "adm1n-s3cret-value-0003"
)

var testTokens = []api.Token{
	{Name: "dash", Role: api.RoleRead, Secret: readSecret},
	{Name: "ops", Role: api.RoleOperate, Secret: operateSecret},
	{Name: "root", Role: api.RoleAdmin, Secret: adminSecret},
}

// setupAuth is setupAPI with tokens and a cluster handler that answers 200
// to every request it is let through.
func setupAuth(t *testing.T, tokens []api.Token) *apiBundle {
	t.Helper()
	n := enginetest.New()
	cluster := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	return &apiBundle{node: n, h: api.New(api.Config{Hosts: testHosts,
		FSM: n.FSM, Replicator: n, Rules: taskRules, NowFunc: func() time.Time { return now0 },
		StatusFunc: func() api.Status { return api.Status{NodeID: "n1"} }, Cluster: cluster, Tokens: tokens,
	})}
}

// call sends one request from remote with an optional bearer token.
func (b *apiBundle) call(method, target, body, remote, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.RemoteAddr = remote
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	return rec
}

func errorOf(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var out struct {
		Error string `json:"error"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), rec.Body.String())
	require.NotEmpty(t, out.Error, rec.Body.String())
	return out.Error
}

func TestRolesAllowAndRefuse(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, testTokens)
	const remote = "203.0.113.9:5000" // not loopback: tokens decide, not the address
	task := func(key string) string {
		return `{"key":"` + key + `","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`
	}
	cases := []struct {
		name, method, target, body, token string
		want                              int
	}{
		{"no token reads nothing", http.MethodGet, "/v1/tasks", "", "", http.StatusUnauthorized},
		{"no token scrapes nothing", http.MethodGet, "/metrics", "", "", http.StatusUnauthorized},
		{"unknown token", http.MethodGet, "/v1/status", "", "not-a-token", http.StatusUnauthorized},
		{"a token's prefix is not the token", http.MethodGet, "/v1/status", "", readSecret[:10], http.StatusUnauthorized},
		{"read reads", http.MethodGet, "/v1/tasks", "", readSecret, http.StatusOK},
		{"read scrapes", http.MethodGet, "/metrics", "", readSecret, http.StatusOK},
		{"read cannot submit", http.MethodPost, "/v1/tasks", task("r1"), readSecret, http.StatusForbidden},
		{"read cannot cancel", http.MethodDelete, "/v1/tasks/r1", "", readSecret, http.StatusForbidden},
		{"read cannot ack", http.MethodPost, "/v1/alerts/a1/ack", "", readSecret, http.StatusForbidden},
		{"operate submits", http.MethodPost, "/v1/tasks", task("o1"), operateSecret, http.StatusCreated},
		{"operate cannot remove a member", http.MethodPost, "/v1/cluster/remove", `{"id":"n3"}`, operateSecret, http.StatusForbidden},
		{"operate cannot join a node", http.MethodPost, "/v1/cluster/join", `{"id":"evil"}`, operateSecret, http.StatusForbidden},
		{"operate cannot make a node leave", http.MethodPost, "/v1/cluster/leave", ``, operateSecret, http.StatusForbidden},
		{"read sees membership", http.MethodGet, "/v1/cluster/status", "", readSecret, http.StatusOK},
		{"admin removes", http.MethodPost, "/v1/cluster/remove", `{"id":"n3"}`, adminSecret, http.StatusOK},
		{"admin submits too", http.MethodPost, "/v1/tasks", task("a1"), adminSecret, http.StatusCreated},
		{"the dashboard page needs no token", http.MethodGet, "/ui/", "", "", http.StatusOK},
		{"a route nobody declared is protected by its method", http.MethodPut, "/v1/some/later/endpoint", "{}", readSecret, http.StatusForbidden},
	}
	for _, c := range cases {
		rec := b.call(c.method, c.target, c.body, remote, c.token)
		require.Equal(t, c.want, rec.Code, "%s: %s", c.name, rec.Body.String())
		if c.want == http.StatusUnauthorized || c.want == http.StatusForbidden {
			msg := errorOf(t, rec)
			for _, s := range []string{readSecret, operateSecret, adminSecret, "not-a-token"} {
				require.NotContains(t, msg, s, c.name)
			}
		}
		if c.want == http.StatusUnauthorized {
			require.NotEmpty(t, rec.Header().Get("WWW-Authenticate"), c.name)
		}
	}
}

func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, testTokens)
	req := httptest.NewRequest(http.MethodGet, "/v1/tasks", nil)
	req.Header.Set("Authorization", "bearer "+readSecret)
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())

	req.Header.Set("Authorization", "Basic "+readSecret)
	rec = httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusUnauthorized, rec.Code, rec.Body.String())
}

func TestWithoutTokensOnlyLoopbackWrites(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, nil)
	body := `{"key":"k1","rule":"enquiry_timeout","due_at":"2026-12-01T10:15:00+08:00"}`

	rec := b.call(http.MethodPost, "/v1/tasks", body, "203.0.113.9:5000", "")
	require.Equal(t, http.StatusUnauthorized, rec.Code, rec.Body.String())
	require.Contains(t, errorOf(t, rec), "tokens:", "the refusal says how to configure tokens")
	rec = b.call(http.MethodPost, "/v1/cluster/remove", `{"id":"n1"}`, "203.0.113.9:5000", "")
	require.Equal(t, http.StatusUnauthorized, rec.Code, rec.Body.String())
	// A header cannot make a remote caller local.
	req := httptest.NewRequest(http.MethodPost, "/v1/tasks", strings.NewReader(body))
	req.RemoteAddr = "203.0.113.9:5000"
	req.Header.Set("X-Forwarded-For", "127.0.0.1")
	req.Header.Set("X-Herald-Forwarded-By", "n2")
	rec = httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())

	for _, local := range []string{"127.0.0.1:5000", "[::1]:5000", "127.8.9.10:5000"} {
		rec = b.call(http.MethodGet, "/v1/tasks", "", local, "")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	}
	rec = b.call(http.MethodPost, "/v1/tasks", body, "127.0.0.1:5000", "")
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	rec = b.call(http.MethodPost, "/v1/cluster/remove", `{"id":"n1"}`, "[::1]:5000", "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	// Reads stay open to all.
	rec = b.call(http.MethodGet, "/v1/tasks", "", "203.0.113.9:5000", "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}

func TestRouteRoleDefaults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method, path string
		want         api.Role
	}{
		{http.MethodGet, "/v1/tasks", api.RoleRead},
		{http.MethodHead, "/v1/status", api.RoleRead},
		{http.MethodGet, "/metrics", api.RoleRead},
		{http.MethodPost, "/v1/tasks", api.RoleOperate},
		{http.MethodDelete, "/v1/tasks/x", api.RoleOperate},
		{http.MethodPost, "/v1/rules/daily/fire", api.RoleOperate},
		{http.MethodPost, "/v1/anything/new", api.RoleOperate},
		{http.MethodPost, "/v1/cluster/join", api.RoleAdmin},
		{http.MethodPost, "/v1/cluster/leave", api.RoleAdmin},
		{http.MethodPost, "/v1/cluster/remove", api.RoleAdmin},
		{http.MethodPost, "/v1/cluster/transfer-leader", api.RoleAdmin},
		{http.MethodPost, "/v1/cluster/anything", api.RoleAdmin},
		{http.MethodGet, "/v1/cluster/status", api.RoleRead},
		{http.MethodGet, "/ui/", api.RolePublic},
		{http.MethodGet, "/ui/app.js", api.RolePublic},
		{http.MethodGet, "/", api.RolePublic},
		{http.MethodPost, "/ui/", api.RoleOperate},
	} {
		r := httptest.NewRequest(c.method, c.path, nil)
		require.Equal(t, c.want, api.RouteRole(r), "%s %s", c.method, c.path)
	}
}

func TestParseRole(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"read", "operate", "admin"} {
		r, err := api.ParseRole(s)
		require.NoError(t, err)
		require.Equal(t, s, r.String())
	}
	_, err := api.ParseRole("root")
	require.ErrorContains(t, err, "want read, operate or admin")
}

func TestIsLoopbackAddr(t *testing.T) {
	t.Parallel()
	require.True(t, api.IsLoopbackAddr("127.0.0.1:8101"))
	require.True(t, api.IsLoopbackAddr("localhost:8101"))
	require.True(t, api.IsLoopbackAddr("[::1]:8101"))
	require.False(t, api.IsLoopbackAddr("0.0.0.0:8101"))
	require.False(t, api.IsLoopbackAddr(":8101"))
	require.False(t, api.IsLoopbackAddr("10.0.0.1:8101"))
}

// Without tokens, a join that proves the cluster secret may come from
// another machine (its handler checks the proof); nothing else may.
func TestWithoutTokensASignedJoinPasses(t *testing.T) {
	t.Parallel()
	n := enginetest.New()
	cluster := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) })
	h := api.New(api.Config{Hosts: testHosts, FSM: n.FSM, Replicator: n, Rules: taskRules, Cluster: cluster,
		StatusFunc:     func() api.Status { return api.Status{} },
		PeerSignedFunc: func(r *http.Request) bool { return r.URL.Path == "/v1/cluster/join" && r.Header.Get("X-Proof") != "" }})
	send := func(path string, proof bool) int {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{}`))
		req.RemoteAddr = "203.0.113.9:5000"
		if proof {
			req.Header.Set("X-Proof", "1")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusOK, send("/v1/cluster/join", true))
	require.Equal(t, http.StatusUnauthorized, send("/v1/cluster/join", false))
	require.Equal(t, http.StatusUnauthorized, send("/v1/cluster/remove", true))
}

// Without tokens, loopback is a person at this machine, not a page that
// rebound its name to 127.0.0.1: the request the issue sent to `herald
// dev` (Host and Origin evil.example, same-origin to the browser) is
// refused with the reason, and so are reads and the dashboard's page
// under that name. The names this node is reached by on purpose pass.
func TestWithoutTokensRebindingIsRefused(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, nil)
	send := func(method, target, host string, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, nil)
		req.RemoteAddr = "127.0.0.1:40000"
		req.Host = host
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		b.h.ServeHTTP(rec, req)
		return rec
	}
	browser := map[string]string{"Origin": "http://evil.example:10101", "Sec-Fetch-Site": "same-origin"}
	rec := send(http.MethodPost, "/v1/rules/demo/pause", "evil.example:10101", browser)
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	require.Contains(t, errorOf(t, rec), `Host "evil.example:10101" is not this node's name`)
	require.Contains(t, errorOf(t, rec), "tokens:")
	for _, target := range []string{"/v1/status", "/v1/tasks", "/ui/", "/metrics"} {
		rec = send(http.MethodGet, target, "evil.example:10101", browser)
		require.Equal(t, http.StatusForbidden, rec.Code, "GET %s: %s", target, rec.Body.String())
	}
	for _, host := range []string{"127.0.0.1:10101", "localhost:10101", "LOCALHOST.", "[::1]:10101", "127.3.2.1", "example.com:10101"} {
		rec = send(http.MethodGet, "/v1/tasks", host, nil)
		require.Equal(t, http.StatusOK, rec.Code, "Host %s: %s", host, rec.Body.String())
		rec = send(http.MethodPost, "/v1/cluster/remove", host, nil)
		require.Equal(t, http.StatusOK, rec.Code, "Host %s: %s", host, rec.Body.String())
	}
	for _, host := range []string{"", "localhost.evil.example", "127.0.0.1.evil.example:10101", "203.0.113.9:10101"} {
		rec = send(http.MethodGet, "/v1/tasks", host, nil)
		require.Equal(t, http.StatusForbidden, rec.Code, "Host %q: %s", host, rec.Body.String())
	}
	// Probes send the address they dialled, and read nothing a token guards.
	rec = send(http.MethodGet, "/v1/health", "10.1.2.3:8101", nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	// WeCom's callbacks come under the public name, through a proxy; their
	// signature is checked by the receiver (none here: 404, not 403).
	rec = send(http.MethodPost, "/v1/wecom/callback/wecom", "herald.example.com", map[string]string{"X-Forwarded-For": "203.0.113.9"})
	require.NotEqual(t, http.StatusForbidden, rec.Code, rec.Body.String())
}

// Without tokens, a write a proxy on this machine passed on (it comes
// from loopback, but says it was forwarded) is refused: the proxy's
// clients are not people at this machine. Reads through it stay open.
func TestWithoutTokensProxiedWriteIsRefused(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, nil)
	for _, hdr := range [][2]string{{"X-Forwarded-For", "203.0.113.9"}, {"Forwarded", "for=203.0.113.9;proto=https"}} {
		req := httptest.NewRequest(http.MethodPost, "/v1/cluster/remove", strings.NewReader(`{"id":"n3"}`))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Host = "127.0.0.1:8101"
		req.Header.Set(hdr[0], hdr[1])
		rec := httptest.NewRecorder()
		b.h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
		require.Contains(t, errorOf(t, rec), "carries "+hdr[0]+", so a proxy passed it on")

		req = httptest.NewRequest(http.MethodGet, "/v1/tasks", nil)
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set(hdr[0], hdr[1])
		rec = httptest.NewRecorder()
		b.h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	}
}

// With tokens, a member's read that carries the node read credential
// (PeerReadFunc) is taken as role read without a token; nothing it does
// not prove, and no write, is.
func TestNodeReadCredentialIsRead(t *testing.T) {
	t.Parallel()
	n := enginetest.New()
	cluster := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) })
	h := api.New(api.Config{FSM: n.FSM, Replicator: n, Rules: taskRules, Cluster: cluster, Tokens: testTokens,
		StatusFunc: func() api.Status { return api.Status{} },
		PeerReadFunc: func(r *http.Request) bool {
			return r.Header.Get("X-Node") == "ok" && r.URL.Path == "/v1/cluster/status"
		}})
	send := func(method, path, node string) int {
		req := httptest.NewRequest(method, path, strings.NewReader(`{}`))
		req.RemoteAddr = "203.0.113.9:5000"
		if node != "" {
			req.Header.Set("X-Node", node)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusOK, send(http.MethodGet, "/v1/cluster/status", "ok"))
	require.Equal(t, http.StatusUnauthorized, send(http.MethodGet, "/v1/cluster/status", "bad"))
	require.Equal(t, http.StatusUnauthorized, send(http.MethodGet, "/v1/cluster/status", ""))
	require.Equal(t, http.StatusUnauthorized, send(http.MethodGet, "/v1/deliveries", "ok"))
	require.Equal(t, http.StatusUnauthorized, send(http.MethodPost, "/v1/cluster/status", "ok"))
}

// countingForwarding counts the vouchers it is asked to check (each costs
// reading and hashing the body).
type countingForwarding struct{ checked *atomic.Int64 }

func (f countingForwarding) Vouch(*http.Request, string) {}
func (f countingForwarding) Vouched(*http.Request) (string, string, bool) {
	f.checked.Add(1)
	return "", "n2", false
}
func (f countingForwarding) Forwarded(http.Header) bool { return false }

// With tokens, a forward's voucher is checked only for a caller whose
// token is known: a stranger's made-up X-Herald-Vouch is answered 401
// without the body being read for it.
func TestWithTokensNoVoucherCheckBeforeTheToken(t *testing.T) {
	t.Parallel()
	n := enginetest.New()
	var checked atomic.Int64
	h := api.New(api.Config{Hosts: testHosts, FSM: n.FSM, Replicator: n, Rules: taskRules, NowFunc: func() time.Time { return now0 },
		StatusFunc: func() api.Status { return api.Status{} }, Tokens: testTokens, Forwarding: countingForwarding{&checked}})
	b := &apiBundle{node: n, h: h}
	for _, token := range []string{"", "not-a-token"} {
		rec := b.call(http.MethodPost, "/v1/tasks", `{}`, "203.0.113.9:5000", token)
		require.Equal(t, http.StatusUnauthorized, rec.Code, rec.Body.String())
	}
	rec := b.call(http.MethodPost, "/v1/tasks", `{}`, "203.0.113.9:5000", readSecret)
	require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	require.Zero(t, checked.Load(), "a voucher was checked for a caller without a (strong enough) token")
	b.call(http.MethodPost, "/v1/tasks", `{}`, "203.0.113.9:5000", operateSecret)
	require.Equal(t, int64(1), checked.Load(), "a token holder's forward is checked")
}
