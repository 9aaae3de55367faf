package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
)

// ErrInsecureTransport is what Connect returns, wrapped with the reason,
// instead of exposing a secret: the server asks for TLS and no TLS setting
// was given, or a password would cross plain TCP to a host that is not
// loopback without AllowPlaintext.
var ErrInsecureTransport = errors.New("insecure transport refused")

// errTLSNotConfigured fails a connection whose server asks for TLS when
// the client was given no TLS setting.
var errTLSNotConfigured = errors.New("the server asks for TLS and no TLS setting was given")

// tlsConfigured says whether o asks for TLS: a CA file, a client
// certificate, or a tls:// URL.
func (o Options) tlsConfigured() bool {
	if o.TLSCAFile != "" || o.TLSCertFile != "" {
		return true
	}
	for _, u := range strings.Split(o.URL, ",") {
		if strings.HasPrefix(strings.TrimSpace(strings.ToLower(u)), "tls://") {
			return true
		}
	}
	return false
}

// transportOptions are the nats.go options of o's TLS settings, and the
// guards that keep a secret off plain TCP.
func (o Options) transportOptions() ([]nats.Option, error) {
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return nil, errors.New("a client certificate needs both TLSCertFile and TLSKeyFile")
	}
	var opts []nats.Option
	if o.tlsConfigured() {
		if o.TLSCAFile != "" {
			opts = append(opts, nats.RootCAs(o.TLSCAFile))
		}
		if o.TLSCertFile != "" {
			opts = append(opts, nats.ClientCert(o.TLSCertFile, o.TLSKeyFile))
		}
		return opts, nil
	}
	// Without TLS settings nats.go would still upgrade when the server's
	// INFO asks for TLS, trusting the system roots; a client told nothing
	// about TLS refuses instead, before its CONNECT (and any secret) is
	// sent. A password goes in clear to loopback hosts only, unless
	// AllowPlaintext: the URLs are checked here, and the dialer checks the
	// servers a cluster names later.
	loopbackOnly := o.sendsSecret() && !o.AllowPlaintext
	if loopbackOnly {
		for _, raw := range strings.Split(o.URL, ",") {
			u, err := url.Parse(strings.TrimSpace(raw))
			if err != nil || u.Host == "" {
				continue // nats.go reports it
			}
			if !loopbackHost(u.Hostname()) {
				return nil, fmt.Errorf("%w: a password would cross plain TCP to %s: give TLS settings (TLSCAFile, a tls:// URL) or set AllowPlaintext", ErrInsecureTransport, u.Host)
			}
		}
	}
	return append(opts, nats.SetCustomDialer(plainDialer{d: net.Dialer{Timeout: o.Timeout}, loopbackOnly: loopbackOnly})), nil
}

// sendsSecret says whether the CONNECT carries a secret itself (a
// password); an nkey or a creds file only signs the server's nonce.
func (o Options) sendsSecret() bool {
	if o.Password != "" {
		return true
	}
	for _, raw := range strings.Split(o.URL, ",") {
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
			return true
		}
	}
	return false
}

// loopbackHost: localhost or a loopback address, without a lookup.
func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// plainDialer dials the connections of a client without TLS settings:
// only loopback hosts when loopbackOnly, and each connection refuses a
// server whose INFO asks for TLS.
type plainDialer struct {
	d            net.Dialer
	loopbackOnly bool
}

func (p plainDialer) Dial(network, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if p.loopbackOnly && !loopbackHost(host) {
		return nil, fmt.Errorf("%w: a password would cross plain TCP to %s", ErrInsecureTransport, address)
	}
	c, err := p.d.Dial(network, address)
	if err != nil {
		return nil, err
	}
	return &infoGuard{Conn: c}, nil
}

// maxInfo bounds the server's first line; nats-server's INFO is far smaller.
const maxInfo = 1 << 20

// infoGuard reads the server's first line, its INFO, and fails the
// connection if it asks for TLS; nats.go acts on INFO only once the whole
// line has arrived, so it never answers such a server.
type infoGuard struct {
	net.Conn
	first   []byte
	checked bool
}

func (g *infoGuard) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	if g.checked || n == 0 {
		return n, err
	}
	g.first = append(g.first, p[:n]...)
	line, _, found := bytes.Cut(g.first, []byte("\r\n"))
	switch {
	case found:
		g.checked, g.first = true, nil
		var info struct {
			TLSRequired bool `json:"tls_required"`
		}
		if rest, ok := bytes.CutPrefix(line, []byte("INFO ")); ok && json.Unmarshal(rest, &info) == nil && info.TLSRequired {
			return 0, errTLSNotConfigured
		}
	case len(g.first) > maxInfo:
		return 0, errors.New("the server's first line is too long for an INFO")
	}
	return n, err
}

// connectError turns nats.Connect's error into the client's.
func connectError(err error, o Options) error {
	switch {
	case errors.Is(err, errTLSNotConfigured):
		return fmt.Errorf("%w: the server at %s asks for TLS and no TLS setting was given (TLSCAFile, TLSCertFile, or a tls:// URL for the system roots)", ErrInsecureTransport, o.URL)
	case errors.Is(err, ErrInsecureTransport):
		return err
	case errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization"):
		return Refused{Code: CodeAuthorityDenied, Reason: "the NATS server refused the credentials of " + o.Tenant + "." + o.Principal}
	}
	return Unreachable{Op: "connect " + o.URL, Err: err}
}
