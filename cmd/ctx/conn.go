package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/contextos/ledger/gateway"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

// connFlags are the flags every command that talks to contextosd shares.
// Each has an environment variable default so scripts need not repeat them.
type connFlags struct {
	url      string
	tenant   string
	user     string
	password string
	creds    string
	json     bool
	timeout  time.Duration
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func addConnFlags(cmd *cobra.Command) *connFlags {
	c := &connFlags{}
	f := cmd.Flags()
	f.StringVar(&c.url, "nats", envOr("CTX_NATS", "nats://127.0.0.1:4222"), "NATS URL of contextosd ($CTX_NATS)")
	f.StringVar(&c.tenant, "tenant", envOr("CTX_TENANT", ""), "tenant id ($CTX_TENANT)")
	f.StringVar(&c.user, "user", envOr("CTX_USER", ""), "your principal id within the tenant ($CTX_USER)")
	f.StringVar(&c.password, "password", envOr("CTX_PASSWORD", ""), "your password ($CTX_PASSWORD)")
	f.StringVar(&c.creds, "creds", envOr("CTX_CREDS", ""), "NATS credentials file instead of user/password ($CTX_CREDS)")
	f.BoolVar(&c.json, "json", false, "print JSON instead of a table")
	f.DurationVar(&c.timeout, "timeout", 30*time.Second, "how long to wait for a reply")
	return c
}

func (c *connFlags) dial() (*nats.Conn, error) {
	if c.tenant == "" || c.user == "" {
		return nil, usageError("--tenant and --user are required")
	}
	opts := []nats.Option{nats.Name("ctx"), nats.CustomInboxPrefix(gateway.InboxPrefix(c.tenant, c.user))}
	if c.creds != "" {
		opts = append(opts, nats.UserCredentials(c.creds))
	} else {
		opts = append(opts, nats.UserInfo(gateway.UserName(c.tenant, c.user), c.password))
	}
	nc, err := nats.Connect(c.url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", c.url, err)
	}
	return nc, nil
}

// op sends an operator verb and decodes the reply into out.
func (c *connFlags) op(verb string, req, out any) error {
	nc, err := c.dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	msg, err := nc.Request(gateway.OpSubject(c.tenant, verb, c.user), b, c.timeout)
	if err != nil {
		return fmt.Errorf("%s: %w (is contextosd running, and are you an operator of %s?)", verb, err, c.tenant)
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		return fmt.Errorf("%s: bad reply: %w", verb, err)
	}
	return nil
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
