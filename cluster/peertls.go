package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
)

// Node-to-node HTTPS checks more than the CA: that the server is the
// member the node meant to reach. The CA signs every member's certificate,
// so without this a member (or a removed one, or whoever holds one key)
// could answer at another member's address, and be sent its forwarded
// writes and their callers' tokens. A node dials a member's recorded HTTP
// address (forwarding, the status fan-out, reports, build polls); when
// the address is a member's, the server's certificate must be that
// member's: its common name is the member id, as `herald tls init` writes
// it, when this node's own certificate is named so; with certificates
// named otherwise (an operator's own PKI), its names must cover the host
// dialled. An address no member holds (the one a joining node was given)
// is checked by CA alone; the cluster secret's reply proves the rest.

// PeerDialer returns a DialTLSContext for node-to-node HTTPS from node
// self: the current certificate and CA (ClientConfig), and, when
// memberAt names the member whose HTTP address was dialled, that member's
// certificate.
func (s *CertStore) PeerDialer(self string, memberAt func(addr string) string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		conf := s.ClientConfig()
		conf.ServerName = host
		if want := memberAt(addr); want != "" {
			byID := s.Certificate().Subject.CommonName == self
			conf.VerifyConnection = func(cs tls.ConnectionState) error {
				return checkPeerIdentity(cs, addr, host, want, byID)
			}
		}
		raw, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(raw, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return tc, nil
	}
}

// errWrongPeer is wrapped by the refusal of a server whose certificate is
// not the member's whose address was dialled.
var errWrongPeer = errors.New("the server's certificate is not the member's it was dialled as")

func checkPeerIdentity(cs tls.ConnectionState, addr, host, want string, byID bool) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: it sent none", errWrongPeer)
	}
	c := cs.PeerCertificates[0]
	if byID {
		if c.Subject.CommonName != want {
			return fmt.Errorf("%w: %s is member %s's HTTP address, and the certificate there names %q "+
				"(another member's certificate, or a removed one's)", errWrongPeer, addr, want, c.Subject.CommonName)
		}
		return nil
	}
	if err := c.VerifyHostname(host); err != nil {
		return fmt.Errorf("%w: %s is member %s's HTTP address: %v", errWrongPeer, addr, want, err)
	}
	return nil
}

// MemberAt is the id of the member whose recorded HTTP address is addr
// (host:port), "" when none is.
func (n *Node) MemberAt(addr string) string {
	for _, m := range n.sm.Members() {
		a := m.HTTPAddr
		if i := strings.Index(a, "://"); i >= 0 {
			a = a[i+3:]
		}
		if strings.TrimSuffix(a, "/") == addr {
			return m.ID
		}
	}
	return ""
}
