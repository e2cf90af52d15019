package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// testTLS returns a mutual-TLS config trusting one self-signed certificate
// for 127.0.0.1, used by every node both to accept and to dial.
func testTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "herald-test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
}

func TestTLSTransport(t *testing.T) {
	t.Parallel()
	conf := testTLS(t)
	nodes := newCluster(t, 3, nil, func(c *Config) { c.TLS = conf })
	leader := leaderOf(t, nodes)
	apply(t, nodes, setCmd("secure", "yes"))
	waitValue(t, nodes, "secure", "yes")

	// A plain-TCP client cannot speak to a TLS transport.
	plain, err := listen("127.0.0.1:0", nil, nil)
	require.NoError(t, err)
	defer plain.Close()
	c, err := plain.Dial(raftAddr(leader), time.Second)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(make([]byte, 16)) // not a TLS record header
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err, "the TLS side must not answer a plain request")
}

func raftAddr(tn *testNode) raft.ServerAddress { return raft.ServerAddress(tn.raftAddr) }

// A TLS config the transport cannot accept with (no certificate) is a
// config error at New, not a stream of handshake failures in the logs.
func TestTLSWithoutCertificateIsRefused(t *testing.T) {
	t.Parallel()
	conf := testTLS(t)
	conf.Certificates = nil
	_, err := New(Config{NodeID: "a", DataDir: t.TempDir(), RaftAddr: freeAddr(t), TLS: conf, Logger: testLogger()}, newTestSM())
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.Contains(t, err.Error(), "certificate")
}
