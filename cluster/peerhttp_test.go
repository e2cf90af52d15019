package cluster

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// TestPeerTransportKeepsConnections: two rounds of 64 requests at once
// through PeerTransport open no new connection in the second round, as a
// follower forwarding 64 clients' writes to the leader must not dial one
// a write (net/http's default keeps two idle connections a host).
func TestPeerTransportKeepsConnections(t *testing.T) {
	var dials atomic.Int64
	release := make(chan struct{})
	var inFlight sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Done()
		<-release // hold every request of a round until all have arrived
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tr := PeerTransport()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	const n = 64
	round := func() {
		inFlight.Add(n)
		var done sync.WaitGroup
		for range n {
			done.Go(func() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			})
		}
		inFlight.Wait()
		for range n {
			release <- struct{}{}
		}
		done.Wait()
	}
	round()
	first := dials.Load()
	round()
	if again := dials.Load() - first; again != 0 {
		t.Fatalf("the second round of %d requests opened %d new connections (the first opened %d): idle connections were not kept", n, again, first)
	}
}
