package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAPICmdsTimeout: a node that does not answer in --timeout is named,
// with the timeout, not reported as a bare "context deadline exceeded";
// a --timeout that leaves no time at all is refused as such.
func TestAPICmdsTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	addr := srv.Listener.Addr().String()
	for _, args := range [][]string{{"deliveries", "list"}, {"rules", "pause", "daily_report"}} {
		_, err := runHerald(t, append(args, "--addr", addr, "--timeout", "200ms")...)
		require.ErrorContains(t, err, addr+": no answer within --timeout 200ms", args)
		_, err = runHerald(t, append(args, "--addr", addr, "--timeout", "0s")...)
		require.ErrorContains(t, err, "--timeout 0s: want a positive duration", args)
	}
	for _, args := range [][]string{{"cluster", "status"}, {"cluster", "remove", "n3"}} {
		_, err := runHerald(t, append(args, "--addr", addr, "--timeout", "200ms")...)
		require.ErrorContains(t, err, addr+": no answer within --timeout 200ms", args)
		_, err = runHerald(t, append(args, "--addr", addr, "--timeout", "0s")...)
		require.ErrorContains(t, err, "--timeout 0s: want a positive duration", args)
	}
}

// TestCAWithPlainHTTPRefused: --ca says the nodes speak TLS, so an explicit
// http:// address is a mistake that would send the token in clear; the
// CLI refuses before it connects (the server here would record a request).
func TestCAWithPlainHTTPRefused(t *testing.T) {
	t.Parallel()
	var asked atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { asked.Store(true) }))
	t.Cleanup(srv.Close)
	_, err := runHerald(t, "task", "list", "--addr", srv.URL, "--ca", "ca.pem", "--token", "s3cret-token-value")
	require.ErrorContains(t, err, "http:// is plain text")
	require.NotContains(t, err.Error(), "s3cret")
	require.False(t, asked.Load())
}

// TestClusterStatusJSON: cluster status --json prints as every other
// command's --json does (cliout.EmitJSON): a build or id with < > & reads as
// written, not as \u003c escapes meant for HTML.
func TestClusterStatusJSON(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/cluster/status", r.URL.Path)
		_, _ = w.Write([]byte(`{"node_id":"n1","leader_id":"n1","state":"leader","build":"v1.2.3+<local>&x","members":[]}`))
	}))
	t.Cleanup(srv.Close)
	out, err := runHerald(t, "cluster", "status", "--addr", srv.Listener.Addr().String(), "--json")
	require.NoError(t, err)
	require.Contains(t, out, `"build": "v1.2.3+<local>&x"`)
}
