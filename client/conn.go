package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// DefaultURL is where an embedded contextosd listens by default.
const DefaultURL = "nats://127.0.0.1:4222"

// Options say where contextosd is and who connects. Exactly one kind of
// credential is used: CredsFile, then NKeyFile, then Password (with the
// NATS user "<tenant>.<principal>"). Context, when set, names a NATS
// context whose url, user, password, creds, nkey, ca, cert and key fill
// what the other fields leave empty.
//
// TLS is on with TLSCAFile, a client certificate or a tls:// URL. Without
// any of them Connect refuses a server that asks for TLS, and refuses to
// send a password over plain TCP to a host that is not loopback unless
// AllowPlaintext says so (ErrInsecureTransport).
type Options struct {
	URL       string
	Tenant    string
	Principal string
	Password  string
	// NKeyFile is an nkey seed file (an "SU..." user seed).
	NKeyFile string
	// CredsFile is a NATS credentials file (user JWT and seed).
	CredsFile string
	// TLSCAFile is a PEM bundle of the CAs the server's certificate is
	// checked against instead of the system roots.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are a client certificate and its key (PEM),
	// for servers that verify clients; together or not at all.
	TLSCertFile string
	TLSKeyFile  string
	// AllowPlaintext lets a password cross plain TCP to a host that is not
	// loopback (a private network the deployer trusts).
	AllowPlaintext bool
	// Context is a NATS context: a name under
	// $XDG_CONFIG_HOME/nats/context/ (~/.config by default), or a path to
	// its JSON file.
	Context string
	// Timeout bounds one request; a proposal resends past it (default 5s).
	Timeout time.Duration
	// Name is the connection's name on the server (default "contextos-client").
	Name string
	// OnResend, when set, is called before each resend of a proposal with
	// the number of resends so far and why (no reply, or an unknown one).
	OnResend func(resends int, why error)
}

// Client is a connection of one principal (an agent or an operator).
type Client struct {
	nc        *nats.Conn
	tenant    string
	principal string
	timeout   time.Duration
	onResend  func(int, error)

	mu       sync.Mutex
	inflight map[uint64]watch
	next     uint64
}

type watch struct {
	subject string
	cancel  context.CancelCauseFunc
}

// NATSContext is the part of a NATS context file (as the nats CLI writes
// it) that a client uses.
type NATSContext struct {
	URL      string `json:"url"`
	User     string `json:"user"`
	Password string `json:"password"`
	Creds    string `json:"creds"`
	NKey     string `json:"nkey"`
	Token    string `json:"token"`
	// CA, Cert and Key are the TLS files, as the nats CLI names them.
	CA   string `json:"ca"`
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// LoadContext reads a NATS context by name or path.
func LoadContext(nameOrPath string) (NATSContext, error) {
	path := nameOrPath
	if !strings.ContainsRune(path, os.PathSeparator) && !strings.HasSuffix(path, ".json") {
		dir := os.Getenv("XDG_CONFIG_HOME")
		if dir == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return NATSContext{}, err
			}
			dir = filepath.Join(home, ".config")
		}
		path = filepath.Join(dir, "nats", "context", nameOrPath+".json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return NATSContext{}, fmt.Errorf("nats context: %w", err)
	}
	var c NATSContext
	if err := json.Unmarshal(b, &c); err != nil {
		return NATSContext{}, fmt.Errorf("nats context %s: %w", path, err)
	}
	return c, nil
}

// Resolve fills o from its NATS context (fields already set win) and
// checks that it names a tenant, a principal and at most one credential.
// A context's user "<tenant>.<principal>" names both.
func (o Options) Resolve() (Options, error) {
	if o.Context != "" {
		c, err := LoadContext(o.Context)
		if err != nil {
			return o, err
		}
		if c.Token != "" {
			return o, errors.New("nats context: token authentication is not used by contextosd; give a user and password, an nkey or a creds file")
		}
		if o.URL == "" {
			o.URL = c.URL
		}
		if t, p, ok := strings.Cut(c.User, "."); ok && o.Tenant == "" && o.Principal == "" {
			o.Tenant, o.Principal = t, p
		}
		if o.Password == "" && o.NKeyFile == "" && o.CredsFile == "" {
			o.Password, o.NKeyFile, o.CredsFile = c.Password, c.NKey, c.Creds
		}
		if o.TLSCAFile == "" {
			o.TLSCAFile = c.CA
		}
		if o.TLSCertFile == "" && o.TLSKeyFile == "" {
			o.TLSCertFile, o.TLSKeyFile = c.Cert, c.Key
		}
	}
	if o.URL == "" {
		o.URL = DefaultURL
	}
	if o.Tenant == "" || o.Principal == "" {
		return o, errors.New("a tenant and a principal are required")
	}
	for _, id := range []string{o.Tenant, o.Principal} {
		if strings.ContainsAny(id, ".*> \t\r\n") {
			return o, fmt.Errorf("%q is not a tenant or principal id: one subject token, no '.', '*', '>' or space", id)
		}
	}
	n := 0
	for _, s := range []string{o.Password, o.NKeyFile, o.CredsFile} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return o, errors.New("give one credential: a password, an nkey seed file or a creds file")
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Name == "" {
		o.Name = "contextos-client"
	}
	return o, nil
}

// Connect connects as o's principal. A server that refuses the credentials
// gives a Refused (authority_denied); one that cannot be reached an
// Unreachable; a connection that would expose a secret an error wrapping
// ErrInsecureTransport. A lost connection is re-established (nats.go's
// reconnection, with the same inbox prefix).
func Connect(o Options) (*Client, error) {
	o, err := o.Resolve()
	if err != nil {
		return nil, err
	}
	c := &Client{tenant: o.Tenant, principal: o.Principal, timeout: o.Timeout, onResend: o.OnResend, inflight: map[uint64]watch{}}
	opts, err := o.transportOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.Name(o.Name), nats.CustomInboxPrefix(wire.InboxPrefix(o.Tenant, o.Principal)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { c.serverError(err) }))
	switch {
	case o.CredsFile != "":
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	case o.NKeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(o.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nkey: %w", err)
		}
		opts = append(opts, opt)
	default:
		opts = append(opts, nats.UserInfo(wire.UserName(o.Tenant, o.Principal), o.Password))
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, connectError(err, o)
	}
	c.nc = nc
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() { c.nc.Close() }

// Conn is the underlying NATS connection (its inbox prefix is the
// principal's).
func (c *Client) Conn() *nats.Conn { return c.nc }

// Tenant is the client's tenant.
func (c *Client) Tenant() string { return c.tenant }

// Principal is the client's principal.
func (c *Client) Principal() string { return c.principal }

// Timeout is the per-request timeout.
func (c *Client) Timeout() time.Duration { return c.timeout }

// serverError ends the requests a permissions violation names: the server
// refused the publish, so no reply will ever come.
func (c *Client) serverError(err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.inflight {
		if strings.Contains(err.Error(), `"`+w.subject+`"`) || strings.Contains(err.Error(), " "+w.subject) {
			w.cancel(Refused{Code: CodeAuthorityDenied, Reason: "the NATS server refused the publish: " + err.Error()})
		}
	}
}

// request sends one request and waits for its reply at most timeout. A
// permissions violation on the subject ends it with a Refused.
func (c *Client) request(ctx context.Context, subject string, body []byte, timeout time.Duration) (*nats.Msg, error) {
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	tctx, tcancel := context.WithTimeout(rctx, timeout)
	defer tcancel()
	c.mu.Lock()
	c.next++
	id := c.next
	c.inflight[id] = watch{subject: subject, cancel: cancel}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.inflight, id)
		c.mu.Unlock()
	}()
	m, err := c.nc.RequestWithContext(tctx, subject, body)
	if err == nil {
		return m, nil
	}
	var r Refused
	if cause := context.Cause(rctx); errors.As(cause, &r) {
		return nil, r
	}
	return nil, err
}
