package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

// stdout is where commands print; runIO sets it.
var stdout io.Writer = os.Stdout

// connFlags are the flags every command that talks to contextosd shares.
// A flag left unset takes its CTX_* environment variable, then the NATS
// context's value. Defaults are never read from the environment into the
// flag set, so that --help and usage errors cannot print a secret.
type connFlags struct {
	cmd      *cobra.Command
	url      string
	tenant   string
	user     string
	password string
	creds    string
	nkey     string
	tlsCA    string
	tlsCert  string
	tlsKey   string
	plain    bool
	context  string
	output   string
	json     bool
	timeout  time.Duration
}

// connEnv maps each connection flag to its environment variable.
var connEnv = map[string]string{"nats": "CTX_NATS", "tenant": "CTX_TENANT", "user": "CTX_USER", "password": "CTX_PASSWORD",
	"creds": "CTX_CREDS", "nkey": "CTX_NKEY", "tlsca": "CTX_TLSCA", "tlscert": "CTX_TLSCERT", "tlskey": "CTX_TLSKEY",
	"allow-plaintext": "CTX_ALLOW_PLAINTEXT", "context": "CTX_CONTEXT", "output": "CTX_OUTPUT"}

func addConnFlags(cmd *cobra.Command) *connFlags {
	c := &connFlags{cmd: cmd}
	f := cmd.Flags()
	f.StringVar(&c.url, "nats", "", "NATS URL of contextosd ($CTX_NATS; default "+client.DefaultURL+")")
	f.StringVar(&c.tenant, "tenant", "", "tenant id ($CTX_TENANT)")
	f.StringVar(&c.user, "user", "", "your principal id within the tenant ($CTX_USER)")
	f.StringVar(&c.password, "password", "", "your password ($CTX_PASSWORD; prefer the variable: a flag shows in ps)")
	f.StringVar(&c.creds, "creds", "", "NATS credentials file instead of a password ($CTX_CREDS)")
	f.StringVar(&c.nkey, "nkey", "", "nkey seed file instead of a password ($CTX_NKEY)")
	f.StringVar(&c.tlsCA, "tlsca", "", "PEM CA bundle the server's certificate is checked against; turns TLS on ($CTX_TLSCA)")
	f.StringVar(&c.tlsCert, "tlscert", "", "client certificate (PEM) for a server that verifies clients, with --tlskey ($CTX_TLSCERT)")
	f.StringVar(&c.tlsKey, "tlskey", "", "the client certificate's key (PEM) ($CTX_TLSKEY)")
	f.BoolVar(&c.plain, "allow-plaintext", false, "let a password cross plain TCP to a host that is not loopback ($CTX_ALLOW_PLAINTEXT)")
	f.StringVar(&c.context, "context", "", "NATS context name or file with url, user <tenant>.<principal>, credentials and ca, cert, key ($CTX_CONTEXT)")
	f.StringVarP(&c.output, "output", "o", "", "output format: table, wide or json ($CTX_OUTPUT; default table)")
	f.BoolVar(&c.json, "json", false, "same as -o json")
	f.DurationVar(&c.timeout, "timeout", 30*time.Second, "how long to wait for a reply")
	return c
}

// fill takes each unset flag from its environment variable and checks the
// output format.
func (c *connFlags) fill() error {
	for name, env := range connEnv {
		fl := c.cmd.Flags().Lookup(name)
		if fl == nil || fl.Changed {
			continue
		}
		if v := os.Getenv(env); v != "" {
			if err := fl.Value.Set(v); err != nil {
				return usageError("$%s: %v", env, err)
			}
		}
	}
	switch c.output {
	case "", "table", "wide":
	case "json":
		c.json = true
	default:
		return usageError("-o takes table, wide or json, not %q", c.output)
	}
	if c.json {
		c.output = "json"
	}
	return nil
}

func (c *connFlags) wide() bool { return c.output == "wide" }

// connect connects as the operator the flags name.
func (c *connFlags) connect() (*client.Client, error) {
	if err := c.fill(); err != nil {
		return nil, err
	}
	o := client.Options{URL: c.url, Tenant: c.tenant, Principal: c.user, Password: c.password, CredsFile: c.creds,
		NKeyFile: c.nkey, TLSCAFile: c.tlsCA, TLSCertFile: c.tlsCert, TLSKeyFile: c.tlsKey, AllowPlaintext: c.plain,
		Context: c.context, Timeout: c.timeout, Name: "ctx"}
	if c.context == "" && (c.tenant == "" || c.user == "") {
		return nil, usageError("--tenant and --user are required (or --context)")
	}
	o, err := o.Resolve()
	if err != nil {
		if c.context != "" {
			return nil, &ExitError{Code: 1, Err: fmt.Errorf("--context %s: %w", c.context, err)}
		}
		return nil, usageError("%v", err)
	}
	c.url, c.tenant, c.user = o.URL, o.Tenant, o.Principal
	cl, err := client.Connect(o)
	if err != nil {
		return nil, redactErr(err, o.URL)
	}
	return cl, nil
}

// dial connects and returns the NATS connection (its inbox prefix is the
// operator's); closing it closes the client.
func (c *connFlags) dial() (*nats.Conn, error) {
	cl, err := c.connect()
	if err != nil {
		return nil, err
	}
	return cl.Conn(), nil
}

// call connects, runs f with the client and closes it.
func (c *connFlags) call(f func(ctx context.Context, cl *client.Client) error) error {
	cl, err := c.connect()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout+time.Second)
	defer cancel()
	return f(ctx, cl)
}

// redactErr removes a password a NATS URL may carry (nats://user:pw@host)
// from an error.
func redactErr(err error, raw string) error {
	u, perr := url.Parse(raw)
	if perr != nil || u.User == nil {
		return err
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" {
		return err
	}
	return redacted{err: err, secret: pw}
}

type redacted struct {
	err    error
	secret string
}

func (r redacted) Error() string { return strings.ReplaceAll(r.err.Error(), r.secret, "***") }
func (r redacted) Unwrap() error { return r.err }

func printJSON(v any) error {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// op sends an operator verb and decodes its reply, refused or not, into
// out, for a command that reads members of its own reply (it then turns a
// refusal into exit 1 with refused).
func (c *connFlags) op(verb string, req, out any) error {
	return c.call(func(ctx context.Context, cl *client.Client) error {
		b, err := json.Marshal(req)
		if err != nil {
			return err
		}
		raw, err := cl.OpRaw(ctx, verb, b)
		var r client.Refused
		if err != nil && (raw == nil || !errors.As(err, &r)) {
			return err
		}
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s: bad reply: %w", verb, err)
		}
		return nil
	})
}

// refused turns a refused operator reply into exit code 1.
func refused(r wire.OpReply) error {
	if r.OK {
		return nil
	}
	return &ExitError{Code: exitRefused, Err: fmt.Errorf("refused %s: %s", r.Code, wireNames.Replace(r.Reason))}
}

// envOr is the value of an environment variable, or def. Use it only for
// defaults that are not secrets: a flag's default is printed by --help.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
