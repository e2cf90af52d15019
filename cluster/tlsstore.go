package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// ErrTLSFiles is wrapped by every error about a node's certificate, key or
// CA file.
var ErrTLSFiles = errors.New("tls files")

// DefaultTLSCheckInterval is how long a CertStore trusts its last look at
// the files: at most one stat of the three files per interval, whatever the
// handshake rate.
const DefaultTLSCheckInterval = time.Second

// TLSFiles names a node's PEM files: its certificate (with any
// intermediates), its private key, and the CA that signs every member.
type TLSFiles struct {
	Cert, Key, CA string
}

// CertStore holds a node's certificate and the CA pool, and re-reads them
// when their files change, so certificates rotate without a restart. Every
// handshake asks it for the current ones (GetCertificate,
// GetClientCertificate, GetConfigForClient, VerifyPeerCertificate), so a
// rotation takes effect at the next connection. A rotation caught half
// written (a new certificate beside the old key) keeps the last good pair
// and is tried again at the next check.
type CertStore struct {
	files TLSFiles
	log   *slog.Logger
	// CheckInterval: see DefaultTLSCheckInterval; tests set it lower.
	CheckInterval time.Duration
	nowFunc       func() time.Time

	mu       sync.Mutex
	cert     *tls.Certificate
	pool     *x509.CertPool
	stamps   [3]fileStamp
	checked  time.Time
	lastFail string
}

// fileStamp is what tells a changed file: a rename onto the path changes
// the inode, an edit in place the time or size.
type fileStamp struct {
	info os.FileInfo
}

func (s fileStamp) same(info os.FileInfo) bool {
	return s.info != nil && os.SameFile(s.info, info) && s.info.ModTime().Equal(info.ModTime()) && s.info.Size() == info.Size()
}

// NewCertStore loads the files once; an unreadable or inconsistent set is
// an error here, where an operator sees it at start.
func NewCertStore(files TLSFiles, log *slog.Logger) (*CertStore, error) {
	if files.Cert == "" || files.Key == "" || files.CA == "" {
		return nil, fmt.Errorf("%w: tls_cert, tls_key and tls_ca go together: give all three", ErrTLSFiles)
	}
	if log == nil {
		log = slog.Default()
	}
	s := &CertStore{files: files, log: log, CheckInterval: DefaultTLSCheckInterval, nowFunc: time.Now}
	stamps, err := s.stat()
	if err != nil {
		return nil, err
	}
	cert, pool, err := loadTLSFiles(files)
	if err != nil {
		return nil, err
	}
	s.cert, s.pool, s.stamps, s.checked = cert, pool, stamps, s.nowFunc()
	return s, nil
}

func (s *CertStore) stat() ([3]fileStamp, error) {
	var out [3]fileStamp
	for i, p := range []string{s.files.Cert, s.files.Key, s.files.CA} {
		info, err := os.Stat(p)
		if err != nil {
			return out, fmt.Errorf("%w: %v", ErrTLSFiles, err)
		}
		out[i] = fileStamp{info: info}
	}
	return out, nil
}

// loadTLSFiles reads and checks the three files. The error names the file
// and what is wrong with it, never its contents.
func loadTLSFiles(files TLSFiles) (*tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: certificate %s with key %s: %v", ErrTLSFiles, files.Cert, files.Key, err)
	}
	caPEM, err := os.ReadFile(files.CA)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrTLSFiles, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("%w: CA %s holds no PEM certificate", ErrTLSFiles, files.CA)
	}
	if cert.Leaf == nil {
		cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return nil, nil, fmt.Errorf("%w: certificate %s: %v", ErrTLSFiles, files.Cert, err)
		}
	}
	// A node certificate its own CA does not sign would be refused by every
	// peer; say so here rather than in every peer's handshake log.
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, nil, fmt.Errorf("%w: certificate %s is not signed by CA %s: %v", ErrTLSFiles, files.Cert, files.CA, err)
	}
	return &cert, pool, nil
}

// current returns the certificate and CA pool, re-reading the files first
// if they changed since the last check (at most once per CheckInterval).
func (s *CertStore) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowFunc()
	if now.Sub(s.checked) < s.CheckInterval {
		return s.cert, s.pool
	}
	s.checked = now
	stamps, err := s.stat()
	if err == nil && stamps[0].same(s.stamps[0].info) && stamps[1].same(s.stamps[1].info) && stamps[2].same(s.stamps[2].info) {
		return s.cert, s.pool
	}
	if err == nil {
		var cert *tls.Certificate
		var pool *x509.CertPool
		if cert, pool, err = loadTLSFiles(s.files); err == nil {
			s.cert, s.pool, s.stamps, s.lastFail = cert, pool, stamps, ""
			s.log.Info("reloaded TLS certificate and CA", "cert", s.files.Cert, "ca", s.files.CA,
				"not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
			return s.cert, s.pool
		}
	}
	// Keep the last good pair: a rotation may be half written.
	if msg := err.Error(); msg != s.lastFail {
		s.lastFail = msg
		s.log.Warn("TLS files changed but cannot be loaded; keeping the previous certificate", "err", err)
	}
	return s.cert, s.pool
}

// Certificate is the current certificate (for status and tests).
func (s *CertStore) Certificate() *x509.Certificate {
	c, _ := s.current()
	return c.Leaf
}

func (s *CertStore) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c, _ := s.current()
	return c, nil
}

func (s *CertStore) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	c, _ := s.current()
	return c, nil
}

// verifyPeer checks a peer's chain against the current CA, for the given
// use. It replaces the standard check (which reads a fixed pool) so that a
// new CA is trusted without a restart.
func (s *CertStore) verifyPeer(usage x509.ExtKeyUsage) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("peer sent no certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, der := range raw {
			c, err := x509.ParseCertificate(der)
			if err != nil {
				return fmt.Errorf("peer certificate: %w", err)
			}
			certs[i] = c
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, pool := s.current()
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			return fmt.Errorf("peer certificate %q is not signed by this cluster's CA: %w", certs[0].Subject.CommonName, err)
		}
		return nil
	}
}

// RaftConfig is the mutual-TLS config of the Raft transport, used both to
// accept and to dial (cluster.Config.TLS): a node accepts only peers whose
// client certificate the CA signed, and dials only peers whose server
// certificate it signed. Peers are checked by CA, not by host name: the CA
// is the cluster's own, every certificate it signs is a Herald node. (The
// node then checks that an inbound peer's common name is a member's id:
// raftpeers.go.)
func (s *CertStore) RaftConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Server side: a fresh config per handshake carries the current
		// certificate and CA.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := s.current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS13,
				Certificates: []tls.Certificate{*cert},
				ClientCAs:    pool,
				ClientAuth:   tls.RequireAndVerifyClientCert,
			}, nil
		},
		// Client side: the standard check reads a fixed RootCAs pool; the
		// chain is checked against the current CA in VerifyPeerCertificate
		// instead, which runs on every handshake.
		InsecureSkipVerify:    true, //nolint:gosec // verified by VerifyPeerCertificate against the cluster CA
		VerifyPeerCertificate: s.verifyPeer(x509.ExtKeyUsageServerAuth),
		GetClientCertificate:  s.getClientCertificate,
	}
}

// ServerConfig is the HTTPS config of the node's API: the current
// certificate, no client certificate asked (clients authenticate with
// tokens).
func (s *CertStore) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: s.getCertificate,
	}
}

// ClientConfig is for node-to-node HTTPS (join, forwarding, status
// fan-out): it trusts servers whose certificate the current CA signed, and
// presents this node's certificate if asked.
func (s *CertStore) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:            tls.VersionTLS12,
		InsecureSkipVerify:    true, //nolint:gosec // verified by VerifyPeerCertificate against the cluster CA
		VerifyPeerCertificate: s.verifyPeer(x509.ExtKeyUsageServerAuth),
		GetClientCertificate:  s.getClientCertificate,
	}
}
