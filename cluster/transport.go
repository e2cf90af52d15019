package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// ErrAddrInUse is matched (errors.Is) by the error New returns when the Raft
// address is already bound by another process.
var ErrAddrInUse = errors.New("address in use")

// addrInUseError reads "raft address 127.0.0.1:7101 is in use", the message
// an operator needs, while still matching ErrAddrInUse.
type addrInUseError struct{ addr string }

func (e *addrInUseError) Error() string { return fmt.Sprintf("raft address %s is in use", e.addr) }
func (e *addrInUseError) Is(target error) bool {
	return target == ErrAddrInUse
}

// streamLayer is raft's network layer: plain TCP, or TLS on both sides when
// a tls.Config is given. It exists (rather than raft.NewTCPTransport) so the
// node can use an already-open listener and TLS.
//
// Accept hands raft only connections that have spoken: with TLS, whose
// handshake completed; without, that sent their first byte. Raft gives each
// accepted connection a goroutine and a 256 KB buffer and reads it without
// a deadline, so a stranger who connects and stays silent would otherwise
// hold them for ever, one per connection. The waits run concurrently (a
// slow one holds up nobody), each has handshakeTimeout, and at most
// maxPending run at once: past that, a new connection is closed at once
// (a member's dial is retried by raft; a flood costs no more than the cap).
type streamLayer struct {
	net.Listener
	advertise net.Addr
	tls       *tls.Config

	handshakeTimeout time.Duration
	pending          chan struct{}     // one slot per connection not yet spoken (cap: maxPending)
	handshaken       chan acceptResult // what Accept returns
	done             chan struct{}     // closed by Close
	closeOnce        sync.Once
	wg               sync.WaitGroup // the accept loop and its waits

	// conns tracks every open connection, accepted or dialed: raft's
	// NetworkTransport closes neither kind on Close, which would leave this
	// node's connection handlers (and the peers' handlers of our pooled
	// connections) blocked in Read after Shutdown.
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool

	// served counts the accepted connections handed to raft whose handler
	// has not returned yet (raft's handler closes its connection as it
	// returns). Raft's Shutdown does not wait for these handlers, and one
	// that read a heartbeat just before it can still write the current term
	// to the store afterwards: the node waits for them (awaitHandlers)
	// before closing the store, or raft panics on "database not open".
	served sync.WaitGroup

	// check, once set (TLS only), admits or refuses the peer of every
	// inbound connection after its handshake (raftpeers.go).
	check atomic.Pointer[peerCheck]
}

// peerCheck is who may connect: admit says why a peer may not (nil: it
// may); refused reports one that was refused.
type peerCheck struct {
	admit   func(peer *x509.Certificate) error
	refused func(peer *x509.Certificate, remote string, why error)
}

// trackedConn removes itself from its stream layer when closed.
type trackedConn struct {
	net.Conn
	s      *streamLayer
	once   sync.Once
	peer   atomic.Pointer[x509.Certificate] // an accepted TLS peer's certificate
	handed atomic.Bool                      // given to raft by Accept: its handler closes it
}

// Close is what raft calls (an accepted connection's handler as it returns,
// a dialed one when it is dropped from the pool) and what greet calls
// before a connection is handed over.
func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		if c.handed.Load() {
			c.s.served.Done()
		}
	})
	return c.Conn.Close()
}

// abort closes the connection under raft: a handed connection's handler
// then fails its read and returns, closing it (Close) as it goes, which is
// what awaitHandlers waits for.
func (c *trackedConn) abort() {
	if c.handed.Load() {
		c.Conn.Close()
		return
	}
	c.Close()
}

func (s *streamLayer) track(c net.Conn) (net.Conn, error) {
	tc := &trackedConn{Conn: c, s: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	s.conns[tc] = struct{}{}
	return tc, nil
}

// acceptResult is one outcome of the TLS accept loop.
type acceptResult struct {
	conn net.Conn
	err  error
}

// maxPending bounds the inbound connections that have not spoken yet (see
// streamLayer): far more than a cluster's members ever open at once (raft
// pools 3 per peer), far less than a flood.
const maxPending = 64

// Accept waits for the next inbound Raft connection that has spoken (with
// TLS: completed its handshake; without: sent its first byte).
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case r := <-s.handshaken:
		if tc, ok := r.conn.(*trackedConn); ok {
			s.served.Add(1)
			tc.handed.Store(true)
		}
		return r.conn, r.err
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// acceptLoop accepts TCP connections and waits for each to speak in its own
// goroutine. Errors other than the listener's close go to Accept, so raft
// logs them and backs off.
func (s *streamLayer) acceptLoop() {
	defer s.wg.Done()
	for {
		raw, err := s.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case s.handshaken <- acceptResult{err: err}:
				continue
			case <-s.done:
				return
			}
		}
		select {
		case s.pending <- struct{}{}:
		default:
			raw.Close() // maxPending silent connections already
			continue
		}
		var c net.Conn
		if s.tls != nil {
			c, err = s.track(tls.Server(raw, s.tls))
		} else {
			c, err = s.track(&firstByteConn{Conn: raw})
		}
		if err != nil {
			<-s.pending
			return // closed
		}
		s.wg.Add(1)
		go s.greet(c)
	}
}

// greet waits, within handshakeTimeout, for c to speak (handshake or first
// byte) and hands it to Accept, or closes it.
func (s *streamLayer) greet(c net.Conn) {
	defer s.wg.Done()
	tc := c.(*trackedConn)
	var err error
	if s.tls != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.handshakeTimeout)
		err = tc.Conn.(*tls.Conn).HandshakeContext(ctx)
		cancel()
	} else {
		err = tc.Conn.(*firstByteConn).awaitFirst(s.handshakeTimeout)
	}
	<-s.pending
	if err != nil {
		c.Close()
		return
	}
	if peer := peerCertificate(c); peer != nil {
		if !s.admit(peer, c) {
			return
		}
		tc.peer.Store(peer)
	}
	select {
	case s.handshaken <- acceptResult{conn: c}:
	case <-s.done:
		c.Close()
	}
}

// firstByteConn is a plain inbound connection whose first byte greet read
// (to know it speaks) and Read gives back first.
type firstByteConn struct {
	net.Conn
	first []byte // set by awaitFirst, before the connection is handed over
}

func (c *firstByteConn) awaitFirst(timeout time.Duration) error {
	if err := c.Conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c.Conn, b); err != nil {
		return err
	}
	c.first = b
	return c.Conn.SetReadDeadline(time.Time{})
}

func (c *firstByteConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 && len(p) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// admit asks the peer check (if set) about c's peer, and closes c if it is
// refused.
func (s *streamLayer) admit(peer *x509.Certificate, c net.Conn) bool {
	pc := s.check.Load()
	if pc == nil {
		return true
	}
	if err := pc.admit(peer); err != nil {
		pc.refused(peer, c.RemoteAddr().String(), err)
		if tc, ok := c.(*trackedConn); ok {
			tc.abort()
		} else {
			c.Close()
		}
		return false
	}
	return true
}

// sweep closes the accepted connections whose peer the check no longer
// admits (a member removed after it connected).
func (s *streamLayer) sweep() {
	s.mu.Lock()
	conns := make([]*trackedConn, 0, len(s.conns))
	for c := range s.conns {
		if c.peer.Load() != nil {
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	for _, c := range conns {
		s.admit(c.peer.Load(), c)
	}
}

// Close stops accepting and closes every open connection.
func (s *streamLayer) Close() error {
	err := s.Listener.Close()
	s.closeOnce.Do(func() { close(s.done) })
	s.mu.Lock()
	s.closed = true
	conns := make([]*trackedConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.abort()
	}
	s.wg.Wait()
	return err
}

// awaitHandlers waits, up to timeout, until raft's handler of every
// connection Accept handed over has returned (the stream must be closed
// first, so that each fails its read). It reports whether they all did.
func (s *streamLayer) awaitHandlers(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() {
		s.served.Wait()
		close(done)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

var _ raft.StreamLayer = (*streamLayer)(nil)

// listen opens the Raft listener, or wraps the given one. An inbound
// connection has handshakeTimeout to speak (with TLS: to complete its
// handshake).
func listen(addr string, ln net.Listener, tlsConf *tls.Config, handshakeTimeout time.Duration) (*streamLayer, error) {
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", addr)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, &addrInUseError{addr: addr}
			}
			return nil, fmt.Errorf("listen on raft address %s: %w", addr, err)
		}
	}
	s := &streamLayer{Listener: ln, advertise: advertisedAddr(addr), tls: tlsConf, handshakeTimeout: handshakeTimeout,
		pending: make(chan struct{}, maxPending), handshaken: make(chan acceptResult), done: make(chan struct{}),
		conns: map[*trackedConn]struct{}{}}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr is the advertised address: what the other members dial.
func (s *streamLayer) Addr() net.Addr { return s.advertise }

// advertisedAddr is the Raft address as the config writes it. Raft sends
// it to the followers as the leader's address; a DNS name stays a name
// (not the IP it resolved to when the node started), so a member that
// comes back at a new IP under the same name, as a StatefulSet pod does,
// is known by the name throughout, as the Raft configuration knows it.
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

// Dial opens a connection to another member's Raft transport.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	var (
		c   net.Conn
		err error
	)
	if s.tls != nil {
		c, err = tls.DialWithDialer(d, "tcp", string(address), s.tls)
	} else {
		c, err = d.Dial("tcp", string(address))
	}
	if err != nil {
		return nil, err
	}
	return s.track(c)
}

// peerCertificate is the certificate the other end of a TLS connection
// (from Dial or Accept) presented, or nil.
func peerCertificate(c net.Conn) *x509.Certificate {
	if tc, ok := c.(*trackedConn); ok {
		c = tc.Conn
	}
	if tlsConn, ok := c.(*tls.Conn); ok {
		if peers := tlsConn.ConnectionState().PeerCertificates; len(peers) > 0 {
			return peers[0]
		}
	}
	return nil
}

// newTransport is Raft's transport over stream, without pipelined
// replication (MaxRPCsInFlight 1). hashicorp/raft's pipeline can wedge when
// a follower answers an AppendEntries with Success=false: its send loop
// parks on one unbuffered channel while its decoder parks on the other, so
// the follower keeps getting heartbeats but never another entry until the
// leader restarts, and the leader's Shutdown waits forever on that
// replication goroutine (a 10-minute hang of TestLeaderWorkFollowsTransfers
// under load; hashicorp/raft#612). Raft's maintainers measured that
// pipelining gains little beside batching (hashicorp/raft#541).
func newTransport(stream raft.StreamLayer, timeout time.Duration, logger hclog.Logger) *raft.NetworkTransport {
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:          stream,
		MaxPool:         3,
		MaxRPCsInFlight: 1,
		Timeout:         timeout,
		Logger:          logger,
	})
}
