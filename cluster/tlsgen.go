package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Validity of what InitTLS issues. A node certificate is renewed by running
// it again (the CA is kept); running nodes pick the new files up.
const (
	DevCAValidity   = 10 * 365 * 24 * time.Hour
	DevNodeValidity = 825 * 24 * time.Hour
)

// TLSInitResult lists the files InitTLS wrote.
type TLSInitResult struct {
	// CAReused is true when DIR already had ca.pem and ca-key.pem.
	CAReused bool
	Files    []string
}

// InitTLS writes a development CA (DIR/ca.pem, DIR/ca-key.pem) and, for
// each node, a certificate and key signed by it (DIR/NODE.pem,
// DIR/NODE-key.pem), valid as server and client (Raft is mutual TLS), with
// the node's name, its own hosts and the shared ones (IP addresses or DNS
// names) as subject alternative names. hosts are NODE=HOST entries: each
// certificate names only its node's, so that a node's certificate cannot
// pass for another's at that host; shared are in every certificate (a
// name all nodes answer to: a load balancer, or localhost on one
// machine). Keys are ECDSA P-256, written 0600. An
// existing CA in DIR is reused, so running it again adds a node or renews
// certificates without re-keying the cluster. Files are written to a
// temporary name and renamed, so a running node never reads half a file.
func InitTLS(dir string, nodes, hosts, shared []string, now time.Time) (TLSInitResult, error) {
	var res TLSInitResult
	if len(nodes) == 0 {
		return res, errors.New("no node names: give --nodes n1,n2,n3")
	}
	own := map[string][]string{}
	for _, h := range hosts {
		node, host, ok := strings.Cut(h, "=")
		switch {
		case !ok:
			return res, fmt.Errorf("--hosts %s: say which node's host it is (%s=%s); a name every certificate should carry goes in --shared-hosts "+
				"(each node's certificate names only its own hosts, so that one node's certificate cannot pass for another's)", h, nodes[0], h)
		case !slices.Contains(nodes, node):
			return res, fmt.Errorf("--hosts %s: %s is not one of --nodes (%s)", h, node, strings.Join(nodes, ","))
		case host == "":
			return res, fmt.Errorf("--hosts %s: no host after =", h)
		}
		own[node] = append(own[node], host)
	}
	for _, n := range nodes {
		// NAME.pem must not be another file's name: ca.pem, or the key
		// file (X-key.pem) of the CA or of another node.
		if n == "" || strings.ContainsAny(n, `/\`) || n == "ca" || strings.HasPrefix(n, ".") || strings.HasSuffix(n, "-key") {
			return res, fmt.Errorf("node name %q cannot name a file in %s (names ending in -key are keys' file names)", n, dir)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	caCert, caKey, reused, err := loadOrCreateCA(dir, now)
	if err != nil {
		return res, err
	}
	res.CAReused = reused
	if !reused {
		res.Files = append(res.Files, filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"))
	}
	for _, n := range nodes {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return res, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: n, Organization: []string{"Herald cluster"}},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(DevNodeValidity),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		for _, h := range slices.Concat([]string{n}, own[n], shared) {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else if h != "" {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return res, fmt.Errorf("certificate for %s: %w", n, err)
		}
		certPath, keyPath := filepath.Join(dir, n+".pem"), filepath.Join(dir, n+"-key.pem")
		// Key first: a node reloading between the two writes sees the old
		// certificate with the new key, refuses the pair and keeps its old
		// one until the certificate follows.
		if err := writeKey(keyPath, key); err != nil {
			return res, err
		}
		if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
			return res, err
		}
		res.Files = append(res.Files, certPath, keyPath)
	}
	return res, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

func loadOrCreateCA(dir string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, bool, error) {
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		cb, _ := pem.Decode(certPEM)
		kb, _ := pem.Decode(keyPEM)
		if cb == nil || kb == nil {
			return nil, nil, false, fmt.Errorf("%s or %s is not PEM: remove both to create a new CA", certPath, keyPath)
		}
		cert, err := x509.ParseCertificate(cb.Bytes)
		if err != nil {
			return nil, nil, false, fmt.Errorf("%s: %w", certPath, err)
		}
		key, err := x509.ParseECPrivateKey(kb.Bytes)
		if err != nil {
			return nil, nil, false, fmt.Errorf("%s: %v (only the ECDSA keys herald tls init writes are reused)", keyPath, err)
		}
		return cert, key, true, nil
	case certErr == nil || keyErr == nil:
		return nil, nil, false, fmt.Errorf("%s holds only one of ca.pem and ca-key.pem: restore the other, or remove both to create a new CA", dir)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, false, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Herald cluster CA", Organization: []string{"Herald cluster"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(DevCAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, false, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, false, err
	}
	if err := writeKey(keyPath, key); err != nil {
		return nil, nil, false, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, false, err
	}
	return cert, key, false, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

// writePEM writes atomically: a temporary file in the same directory,
// created with the final mode, then renamed over path.
func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }() // fails harmlessly once renamed
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: kind, Bytes: der}); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
