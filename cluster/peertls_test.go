package cluster

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// Node-to-node HTTPS takes the server at a member's address only with
// that member's certificate: a member (or a removed one) presenting its
// own, CA-signed, certificate at another member's address is refused. An
// address no member holds is checked by CA alone, as before. (On the code
// before, any certificate the CA signed was taken.)
func TestPeerHTTPSChecksTheMember(t *testing.T) {
	t.Parallel()
	_, stores := devTLS(t, "n1", "n2", "n3")
	impostor := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("n2 here"))
	}))
	// Served as the agent serves it (httptest's StartTLS would put its own
	// certificate first).
	impostor.Listener = tls.NewListener(impostor.Listener, stores["n2"].ServerConfig())
	impostor.Start()
	t.Cleanup(impostor.Close)
	addr := impostor.Listener.Addr().String()

	get := func(memberAt string) error {
		t.Helper()
		tr := &http.Transport{DialTLSContext: stores["n1"].PeerDialer("n1", func(a string) string {
			require.Equal(t, addr, a)
			return memberAt
		})}
		t.Cleanup(tr.CloseIdleConnections)
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, "https://"+addr+"/v1/cluster/status", nil)
		require.NoError(t, err)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	err := get("n3")
	require.ErrorIs(t, err, errWrongPeer)
	require.Contains(t, err.Error(), `member n3's HTTP address, and the certificate there names "n2"`)
	require.NoError(t, get("n2"), "the member's own certificate")
	require.NoError(t, get(""), "an address no member holds: the CA decides")
}
