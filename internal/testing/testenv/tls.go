package testenv

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

	"github.com/contextos/ledger/events"
	"github.com/nats-io/nats-server/v2/server"
)

// CA is a private certificate authority made for one test. Its certificate
// is Dir/ca.pem; Issue writes each certificate and key beside it.
type CA struct {
	Dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA makes a CA valid for an hour around now, in a fresh directory.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "contextos test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{cert: cert, key: key, Dir: t.TempDir()}
	ca.write(t, "ca.pem", "CERTIFICATE", der)
	return ca
}

func (ca *CA) write(t testing.TB, name, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(ca.File(name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// File is the path of a file in the CA's directory: "ca.pem", or a
// certificate ("<name>.pem") or key ("<name>-key.pem") Issue wrote.
func (ca *CA) File(name string) string { return filepath.Join(ca.Dir, name) }

// Issue makes a certificate for 127.0.0.1 and localhost, for a server or a
// client as usage says, and writes name.pem and name-key.pem.
func (ca *CA) Issue(t testing.TB, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ca.write(t, name+".pem", "CERTIFICATE", der)
	ca.write(t, name+"-key.pem", "EC PRIVATE KEY", kb)
	cert, err := tls.LoadX509KeyPair(ca.File(name+".pem"), ca.File(name+"-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// Pool is a certificate pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// TLSServer starts a nats-server with JetStream that speaks only TLS, with
// a certificate ca issues for 127.0.0.1 ("nats.pem"), requiring a client
// certificate of ca from every client when verifyClients, and with users.
func TLSServer(t testing.TB, ca *CA, verifyClients bool, users []*server.User) *events.Embedded {
	t.Helper()
	cert := ca.Issue(t, "nats", x509.ExtKeyUsageServerAuth)
	return Server(t, Options{Configure: func(o *server.Options) {
		o.TLS, o.TLSVerify, o.TLSTimeout = true, verifyClients, 2
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if verifyClients {
			o.TLSConfig.ClientCAs, o.TLSConfig.ClientAuth = ca.Pool(), tls.RequireAndVerifyClientCert
		}
		o.Users = users
	}})
}
