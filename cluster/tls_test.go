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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// testTLS returns a mutual-TLS config trusting one self-signed certificate
// for 127.0.0.1 and the test's loopback address, used by every node both
// to accept and to dial.
func testTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "herald-test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(testLoopback(t))},
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
	plain, err := listen("127.0.0.1:0", nil, nil, time.Second)
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

// devTLS writes a CA and certificates for names into a new directory and
// returns a store per name.
func devTLS(t *testing.T, names ...string) (string, map[string]*CertStore) {
	t.Helper()
	return devTLSHosts(t, []string{"127.0.0.1", "localhost", testLoopback(t)}, names...)
}

// devTLSHosts is devTLS with --hosts: every certificate carries them all.
func devTLSHosts(t *testing.T, hosts []string, names ...string) (string, map[string]*CertStore) {
	t.Helper()
	dir := t.TempDir()
	_, err := InitTLS(dir, names, nil, hosts, time.Now())
	require.NoError(t, err)
	stores := map[string]*CertStore{}
	for _, n := range names {
		s, err := NewCertStore(TLSFiles{Cert: filepath.Join(dir, n+".pem"), Key: filepath.Join(dir, n+"-key.pem"), CA: filepath.Join(dir, "ca.pem")}, testLogger())
		require.NoError(t, err)
		s.CheckInterval = 0 // every handshake looks at the files
		stores[n] = s
	}
	return dir, stores
}

func TestInitTLSFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res, err := InitTLS(dir, []string{"n1", "n2"}, nil, []string{"127.0.0.1", "herald.example"}, time.Now())
	require.NoError(t, err)
	require.False(t, res.CAReused)
	for _, f := range []string{"ca.pem", "ca-key.pem", "n1.pem", "n1-key.pem", "n2.pem", "n2-key.pem"} {
		info, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err, f)
		if strings.HasSuffix(f, "-key.pem") {
			require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), f)
		}
	}
	s, err := NewCertStore(TLSFiles{Cert: filepath.Join(dir, "n1.pem"), Key: filepath.Join(dir, "n1-key.pem"), CA: filepath.Join(dir, "ca.pem")}, testLogger())
	require.NoError(t, err)
	c := s.Certificate()
	require.Equal(t, "n1", c.Subject.CommonName)
	require.ElementsMatch(t, []string{"n1", "herald.example"}, c.DNSNames)
	require.Len(t, c.IPAddresses, 1)
	require.ElementsMatch(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, c.ExtKeyUsage)

	// Again: the CA is kept, so the new n3 and the old nodes trust each other.
	ca1, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	res, err = InitTLS(dir, []string{"n3"}, nil, nil, time.Now())
	require.NoError(t, err)
	require.True(t, res.CAReused)
	ca2, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	require.Equal(t, ca1, ca2)
	_, err = NewCertStore(TLSFiles{Cert: filepath.Join(dir, "n3.pem"), Key: filepath.Join(dir, "n3-key.pem"), CA: filepath.Join(dir, "ca.pem")}, testLogger())
	require.NoError(t, err)

	_, err = InitTLS(dir, []string{"../x"}, nil, nil, time.Now())
	require.ErrorContains(t, err, "cannot name a file")
}

// herald tls init writes each node's certificate with its own hosts and
// the shared ones only: one node's certificate is not good for another's
// host. A host given without its node is refused, saying how to give it.
// (On the code before, every --hosts entry went into every certificate.)
func TestInitTLSOwnHosts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := InitTLS(dir, []string{"n1", "n2"}, []string{"n1=10.0.0.11", "n2=10.0.0.12", "n2=n2.example"}, []string{"lb.example"}, time.Now())
	require.NoError(t, err)
	cert := func(n string) *x509.Certificate {
		s, err := NewCertStore(TLSFiles{Cert: filepath.Join(dir, n+".pem"), Key: filepath.Join(dir, n+"-key.pem"), CA: filepath.Join(dir, "ca.pem")}, testLogger())
		require.NoError(t, err)
		return s.Certificate()
	}
	n1, n2 := cert("n1"), cert("n2")
	require.NoError(t, n1.VerifyHostname("10.0.0.11"))
	require.Error(t, n1.VerifyHostname("10.0.0.12"), "n1's certificate is not good at n2's address")
	require.Error(t, n1.VerifyHostname("n2.example"))
	require.NoError(t, n2.VerifyHostname("n2.example"))
	require.NoError(t, n1.VerifyHostname("lb.example"))
	require.NoError(t, n2.VerifyHostname("lb.example"))

	_, err = InitTLS(dir, []string{"n1"}, []string{"10.0.0.11"}, nil, time.Now())
	require.ErrorContains(t, err, "say which node's host it is (n1=10.0.0.11)")
	_, err = InitTLS(dir, []string{"n1"}, []string{"n9=10.0.0.19"}, nil, time.Now())
	require.ErrorContains(t, err, "n9 is not one of --nodes")
}

// A certificate from another CA, or a key that does not match, is refused
// at start with the file named and nothing of its contents.
func TestCertStoreRefusesMismatchedFiles(t *testing.T) {
	t.Parallel()
	dirA, _ := devTLS(t, "n1", "n2")
	dirB, _ := devTLS(t, "n1")
	_, err := NewCertStore(TLSFiles{Cert: filepath.Join(dirB, "n1.pem"), Key: filepath.Join(dirB, "n1-key.pem"), CA: filepath.Join(dirA, "ca.pem")}, testLogger())
	require.ErrorIs(t, err, ErrTLSFiles)
	require.ErrorContains(t, err, "not signed by CA")
	_, err = NewCertStore(TLSFiles{Cert: filepath.Join(dirA, "n1.pem"), Key: filepath.Join(dirA, "n2-key.pem"), CA: filepath.Join(dirA, "ca.pem")}, testLogger())
	require.ErrorIs(t, err, ErrTLSFiles)
	key, rerr := os.ReadFile(filepath.Join(dirA, "n2-key.pem"))
	require.NoError(t, rerr)
	require.NotContains(t, err.Error(), string(key[40:80]))
	_, err = NewCertStore(TLSFiles{Cert: filepath.Join(dirA, "n1.pem")}, testLogger())
	require.ErrorContains(t, err, "go together")
}

// Three nodes on mutual TLS from `herald tls init` files: a node whose
// certificate another CA signed can neither join (the leader's probe of
// its Raft address fails) nor talk Raft to a member.
func TestMutualTLSRefusesAnotherCA(t *testing.T) {
	t.Parallel()
	_, stores := devTLS(t, "n1", "n2", "n3")
	_, rogue := devTLS(t, "evil")
	withTLS := func(c *Config) { c.TLS = stores[c.NodeID].RaftConfig() }
	nodes := newCluster(t, 3, nil, withTLS)
	apply(t, nodes, setCmd("secure", "yes"))
	waitValue(t, nodes, "secure", "yes")
	leader := leaderOf(t, nodes)

	_, err := tryTestNode(t, nodeOpts{id: "evil", join: leader.httpAddr(), modify: func(c *Config) { c.TLS = rogue["evil"].RaftConfig() }})
	require.Error(t, err)
	require.Contains(t, err.Error(), "HTTP 502")
	require.Contains(t, err.Error(), "raft address does not answer")
	require.Len(t, servers(t, leader.node), 3)

	// Straight at the Raft port: the handshake fails both ways.
	evilStream, err := listen("127.0.0.1:0", nil, rogue["evil"].RaftConfig(), time.Second)
	require.NoError(t, err)
	defer evilStream.Close()
	_, err = evilStream.Dial(raftAddr(leader), time.Second)
	require.Error(t, err, "a member's certificate is not signed by the rogue's CA")

	// And with a member's CA but no client certificate of it: refused.
	noCert := &tls.Config{RootCAs: x509.NewCertPool(), InsecureSkipVerify: true, MinVersion: tls.VersionTLS13} //nolint:gosec // the test wants the server's refusal
	c, err := tls.Dial("tcp", leader.raftAddr, noCert)
	if err == nil {
		// TLS 1.3 reports the server's refusal of the client at the first read.
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	require.Error(t, err)
}

// A node's certificate is re-read when its files change: a new one issued
// by the same CA is served at the next handshake, without a restart.
func TestCertStoreRotation(t *testing.T) {
	t.Parallel()
	dir, stores := devTLS(t, "n1", "n2", "n3")
	withTLS := func(c *Config) { c.TLS = stores[c.NodeID].RaftConfig() }
	nodes := newCluster(t, 3, nil, withTLS)
	before := stores["n1"].Certificate().SerialNumber

	_, err := InitTLS(dir, []string{"n1"}, nil, []string{"127.0.0.1"}, time.Now())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return stores["n1"].Certificate().SerialNumber.Cmp(before) != 0
	}, waitTimeout, 10*time.Millisecond)

	// A peer dialling n1 now sees the new certificate.
	st, err := listen("127.0.0.1:0", nil, stores["n2"].RaftConfig(), time.Second)
	require.NoError(t, err)
	defer st.Close()
	c, err := st.Dial(raftAddr(nodes[0]), 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	tc := c.(*trackedConn).Conn.(*tls.Conn)
	require.NoError(t, tc.Handshake())
	require.Equal(t, 0, tc.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(stores["n1"].Certificate().SerialNumber))

	apply(t, nodes, setCmd("after", "rotation"))
	waitValue(t, nodes, "after", "rotation")

	// A broken rotation (a file truncated) keeps the last good pair.
	good := stores["n1"].Certificate().SerialNumber
	require.NoError(t, os.WriteFile(filepath.Join(dir, "n1.pem"), []byte("garbage"), 0o644))
	require.NotNil(t, stores["n1"].Certificate(), "the garbage was looked at and refused")
	require.Equal(t, 0, good.Cmp(stores["n1"].Certificate().SerialNumber))
	apply(t, nodes, setCmd("still", "up"))
	waitValue(t, nodes, "still", "up")
}

// A node name whose certificate file would be another file's name: "ca-key"
// overwrote the CA's private key with a node certificate (and the CA could
// never sign again), "n1-key" beside n1 overwrote n1's key.
func TestInitTLSRefusesNamesThatOverwriteKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := InitTLS(dir, []string{"n1"}, nil, nil, time.Now())
	require.NoError(t, err)
	caKey, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	require.NoError(t, err)
	n1Key, err := os.ReadFile(filepath.Join(dir, "n1-key.pem"))
	require.NoError(t, err)

	for _, name := range []string{"ca-key", "n1-key"} {
		_, err = InitTLS(dir, []string{name}, nil, nil, time.Now())
		require.ErrorContains(t, err, "cannot name a file", name)
	}
	got, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	require.NoError(t, err)
	require.Equal(t, caKey, got)
	got, err = os.ReadFile(filepath.Join(dir, "n1-key.pem"))
	require.NoError(t, err)
	require.Equal(t, n1Key, got)
}
