package cluster

import (
	"errors"
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
