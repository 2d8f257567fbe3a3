/*
Copyright 2026 The dtq Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLS is a throwaway certificate authority and a certificate it signed for
// 127.0.0.1, written as PEM files for redis-server (WithTLS) and for clients
// that take a CA bundle file (CAFile).
type TLS struct {
	CAFile, CertFile, KeyFile string
	pool                      *x509.CertPool
}

// NewTLS creates the CA and the certificate in a temporary directory of t.
func NewTLS(t testing.TB) *TLS {
	t.Helper()
	dir := t.TempDir()
	caKey, caCert, caDER := newCert(t, "dtq test CA", nil, nil)
	key, _, der := newCert(t, "127.0.0.1", caCert, caKey)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &TLS{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"),
		pool: x509.NewCertPool()}
	c.pool.AddCert(caCert)
	for file, block := range map[string]*pem.Block{
		c.CAFile:   {Type: "CERTIFICATE", Bytes: caDER},
		c.CertFile: {Type: "CERTIFICATE", Bytes: der},
		c.KeyFile:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// newCert makes a CA certificate when parent is nil, else a certificate for
// 127.0.0.1 signed by parent.
func newCert(t testing.TB, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	if parent == nil {
		tpl.IsCA, tpl.BasicConstraintsValid = true, true
		tpl.KeyUsage = x509.KeyUsageCertSign
		parent, parentKey = tpl, key
	} else {
		tpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tpl.DNSNames = []string{"localhost"}
		tpl.KeyUsage = x509.KeyUsageDigitalSignature
		// Replication and cluster links present the same certificate as clients.
		tpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

// ClientConfig trusts the CA only. Without a ServerName, each connection
// checks the certificate against the address it dials.
func (c *TLS) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12}
}

// serverArgs are redis-server's TLS arguments; replication links use TLS too.
func (c *TLS) serverArgs() []string {
	return []string{"--tls-cert-file", c.CertFile, "--tls-key-file", c.KeyFile, "--tls-ca-cert-file", c.CAFile,
		"--tls-auth-clients", "no", "--tls-replication", "yes"}
}
