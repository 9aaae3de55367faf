package client_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/ledger/client"
)

// FuzzNATSContext: whatever a NATS context file holds, Resolve either
// refuses it or names a URL, a tenant, a principal and at most one
// credential, and never takes the tenant or principal from anywhere but the
// context's user.
func FuzzNATSContext(f *testing.F) {
	for _, s := range []string{
		`{"url":"nats://127.0.0.1:4222","user":"acme.ops_alice","password":"pw"}`,
		`{"user":"acme.ops_alice","creds":"/x.creds"}`,
		`{"user":"acme","password":"pw"}`,
		`{"user":".x","nkey":"/seed"}`,
		`{"token":"t"}`,
		`{"user":"a.b.c","password":"pw","nkey":"/seed"}`,
		`[]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "ctx.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		o, err := client.Options{Context: path}.Resolve()
		if err != nil {
			return
		}
		if o.URL == "" || o.Tenant == "" || o.Principal == "" {
			t.Fatalf("resolved %q to %+v", b, o)
		}
		c, _ := client.LoadContext(path)
		if c.User != o.Tenant+"."+o.Principal || strings.ContainsAny(o.Tenant+o.Principal, ".*> ") {
			t.Fatalf("identity %s.%s from user %q", o.Tenant, o.Principal, c.User)
		}
		n := 0
		for _, s := range []string{o.Password, o.NKeyFile, o.CredsFile} {
			if s != "" {
				n++
			}
		}
		if n > 1 {
			t.Fatalf("two credentials from %q", b)
		}
	})
}
