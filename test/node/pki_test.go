//go:build node

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

package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
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

// pki is the node's certificates, all from one CA: the API server's serving
// certificate, the admin client (system:masters) every component and the
// test use, and the ServiceAccount token signing key.
type pki struct {
	dir                       string
	ca, serverCert, serverKey string
	adminCert, adminKey       string
	saKey, saPub              string
	caCert                    *x509.Certificate
	caPriv                    *ecdsa.PrivateKey
}

func newPKI(t *testing.T, dir string, ips []net.IP) *pki {
	t.Helper()
	p := &pki{dir: dir}
	must(t, os.MkdirAll(dir, 0o700))
	caPriv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dtq-node-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caPriv.PublicKey, caPriv)
	must(t, err)
	p.caCert, err = x509.ParseCertificate(der)
	must(t, err)
	p.caPriv = caPriv
	p.ca = p.write(t, "ca.crt", "CERTIFICATE", der)
	p.serverCert, p.serverKey = p.issue(t, "apiserver", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: ips,
	})
	p.adminCert, p.adminKey = p.issue(t, "admin", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "dtq-node-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	must(t, err)
	p.saKey = p.write(t, "sa.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa))
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	must(t, err)
	p.saPub = p.write(t, "sa.pub", "PUBLIC KEY", pub)
	return p
}

// issue signs tmpl with the CA and writes <name>.crt and <name>.key.
func (p *pki) issue(t *testing.T, name string, tmpl *x509.Certificate) (certFile, keyFile string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	must(t, err)
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &priv.PublicKey, p.caPriv)
	must(t, err)
	keyDER, err := x509.MarshalECPrivateKey(priv)
	must(t, err)
	return p.write(t, name+".crt", "CERTIFICATE", der), p.write(t, name+".key", "EC PRIVATE KEY", keyDER)
}

func (p *pki) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	must(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}
