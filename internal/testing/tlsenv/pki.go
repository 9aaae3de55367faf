package tlsenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ca is a private certificate authority made for one environment; its
// certificates name 127.0.0.1 and localhost and live a day.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
	pool *x509.CertPool
	next int64
}

func newCA(dir string) (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "contextos tlsenv CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &ca{cert: cert, key: key, dir: dir, pool: x509.NewCertPool(), next: 2}
	c.pool.AddCert(cert)
	if err := c.write("ca.pem", "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *ca) write(name, typ string, der []byte) error {
	return os.WriteFile(filepath.Join(c.dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// issue makes a certificate for usage, writes name.pem and name-key.pem
// and returns it loaded.
func (c *ca) issue(name string, usage x509.ExtKeyUsage) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	c.next++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(c.next), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return tls.Certificate{}, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := c.write(name+".pem", "CERTIFICATE", der); err != nil {
		return tls.Certificate{}, err
	}
	if err := c.write(name+"-key.pem", "EC PRIVATE KEY", kb); err != nil {
		return tls.Certificate{}, err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(c.dir, name+".pem"), filepath.Join(c.dir, name+"-key.pem"))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load %s: %w", name, err)
	}
	return cert, nil
}

// serverTLS is the servers' TLS: this CA's certificate, and client
// certificates of this CA required and verified.
func (c *ca) serverTLS(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: c.pool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS12}
}
