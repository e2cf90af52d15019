package cluster

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// raft's transport gives every connection the stream layer hands it a
// 256 KB read buffer and a goroutine that reads without a deadline. With
// TLS, only a peer that completed the mutual-TLS handshake may get that
// far: a connection that never says anything must not be handed over
// (nor hold up a real peer behind it).
func TestTLSStreamHandsOverOnlyHandshakenConns(t *testing.T) {
	t.Parallel()
	conf := testTLS(t)
	server, err := listen("127.0.0.1:0", nil, conf, time.Minute)
	require.NoError(t, err)
	defer server.Close()

	silent, err := net.Dial("tcp", server.Listener.Addr().String())
	require.NoError(t, err)
	defer silent.Close()

	client, err := listen("127.0.0.1:0", nil, conf, time.Minute)
	require.NoError(t, err)
	defer client.Close()
	dialed := make(chan net.Conn, 1)
	go func() {
		c, err := client.Dial(raft.ServerAddress(server.Listener.Addr().String()), 5*time.Second)
		if err != nil {
			c = nil
		}
		dialed <- c
	}()

	got, err := server.Accept()
	require.NoError(t, err)
	defer got.Close()
	peer := <-dialed
	require.NotNil(t, peer, "the member's dial failed")
	defer peer.Close()
	require.Equal(t, peer.LocalAddr().String(), got.RemoteAddr().String(), "handed over a connection that has not completed its handshake")
}

// A connection to a TLS Raft port that never completes its handshake is
// closed after the handshake timeout (the dial timeout), so strangers
// cannot hold a member's memory and file descriptors for ever.
func TestTLSRaftClosesSilentConnections(t *testing.T) {
	t.Parallel()
	conf := testTLS(t)
	tn := newTestNode(t, nodeOpts{id: "n1", bootstrap: true, modify: func(c *Config) {
		c.TLS = conf
		c.DialTimeout = 300 * time.Millisecond
	}})
	leaderOf(t, []*testNode{tn})

	silent, err := net.Dial("tcp", tn.raftAddr)
	require.NoError(t, err)
	defer silent.Close()
	require.NoError(t, silent.SetReadDeadline(time.Now().Add(waitTimeout)))
	_, err = silent.Read(make([]byte, 1))
	require.Error(t, err)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the member kept a silent connection open: %v", err)
}

// Raft's transport does not pipeline replication (see newTransport): a
// leader asking for a pipeline is told to replicate one request at a time.
func TestTransportDoesNotPipelineReplication(t *testing.T) {
	t.Parallel()
	st, err := listen("127.0.0.1:0", nil, nil, time.Second)
	require.NoError(t, err)
	tr := newTransport(st, time.Second, hclog.NewNullLogger())
	defer func() { require.NoError(t, tr.Close()) }()
	_, err = tr.AppendEntriesPipeline("n2", raft.ServerAddress(st.Addr().String()))
	require.ErrorIs(t, err, raft.ErrPipelineReplicationNotSupported)
}

// Without TLS too, a connection to the Raft port that says nothing is
// closed after the dial timeout: raft would otherwise give it a goroutine
// and a 256 KB buffer for ever.
func TestPlainRaftClosesSilentConnections(t *testing.T) {
	t.Parallel()
	tn := newTestNode(t, nodeOpts{id: "n1", bootstrap: true, modify: func(c *Config) {
		c.DialTimeout = 300 * time.Millisecond
	}})
	leaderOf(t, []*testNode{tn})

	silent, err := net.Dial("tcp", tn.raftAddr)
	require.NoError(t, err)
	defer silent.Close()
	require.NoError(t, silent.SetReadDeadline(time.Now().Add(waitTimeout)))
	_, err = silent.Read(make([]byte, 1))
	require.Error(t, err)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the member kept a silent connection open: %v", err)
}

// At most maxPending connections may wait to speak at once: one more is
// closed at once, and a slot freed lets the next speaker through, whose
// first byte raft still reads.
func TestRaftCapsSilentConnections(t *testing.T) {
	t.Parallel()
	st, err := listen("127.0.0.1:0", nil, nil, time.Minute)
	require.NoError(t, err)
	defer st.Close()
	addr := st.Listener.Addr().String()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := st.Accept()
		if err == nil {
			accepted <- c
		}
	}()

	silent := make([]net.Conn, maxPending)
	for i := range silent {
		silent[i], err = net.Dial("tcp", addr)
		require.NoError(t, err)
		defer silent[i].Close()
	}
	// The listener takes connections in order: this one comes after the
	// cap is full.
	over, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer over.Close()
	require.NoError(t, over.SetReadDeadline(time.Now().Add(waitTimeout)))
	_, err = over.Read(make([]byte, 1))
	require.Error(t, err)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "a connection past the cap was held: %v", err)

	require.NoError(t, silent[0].Close()) // frees its slot once the layer sees the close
	deadline := time.Now().Add(waitTimeout)
	for {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write([]byte("hello"))
		require.NoError(t, err)
		select {
		case got := <-accepted:
			defer got.Close()
			b := make([]byte, 5)
			_, err = io.ReadFull(got, b)
			require.NoError(t, err)
			require.Equal(t, "hello", string(b), "the first byte was lost")
			return
		case <-time.After(50 * time.Millisecond): // refused while the slot was not yet free: dial again
		}
		require.True(t, time.Now().Before(deadline), "no slot came free after a silent connection closed")
	}
}

// Raft's Shutdown does not wait for its connection handlers, and one that
// read a heartbeat just before can still write the term to the store: CI
// saw raft panic on "failed to save current term: database not open". The
// stream layer closes handed connections under their handlers and waits
// for each handler's own close before the node closes the store.
func TestStreamWaitsForRaftHandlersAfterClose(t *testing.T) {
	t.Parallel()
	st, err := listen("127.0.0.1:0", nil, nil, time.Minute)
	require.NoError(t, err)
	peer, err := net.Dial("tcp", st.Listener.Addr().String())
	require.NoError(t, err)
	defer peer.Close()
	_, err = peer.Write([]byte{0})
	require.NoError(t, err)
	conn, err := st.Accept()
	require.NoError(t, err)

	// The handler: reads until its connection fails, then is still busy
	// (a heartbeat in flight) until released, and closes as raft's does.
	release := make(chan struct{})
	readFailed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, conn)
		close(readFailed)
		<-release
		conn.Close()
	}()

	require.NoError(t, st.Close())
	select {
	case <-readFailed:
	case <-time.After(waitTimeout):
		t.Fatal("closing the stream left the handler blocked in its read")
	}
	require.False(t, st.awaitHandlers(50*time.Millisecond), "reported the handlers done while one was still running")
	close(release)
	require.True(t, st.awaitHandlers(waitTimeout), "the handler closed its connection, yet the wait went on")
}
