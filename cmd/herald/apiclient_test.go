package main

import (
	"net/http"
	"net/http/httptest"
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
}
