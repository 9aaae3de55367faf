package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/contextos/ledger/config"
	"golang.org/x/crypto/bcrypt"
)

// TestHashPassword: hash-password prints a bcrypt hash of the first line
// of standard input that the configuration takes as a password, and
// refuses a short password, a bad cost and arguments.
func TestHashPassword(t *testing.T) {
	var out, errOut bytes.Buffer
	if rc := runHashPassword([]string{"--cost", "4"}, strings.NewReader("a-long-operator-passphrase\n"), &out, &errOut); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errOut.String())
	}
	h := strings.TrimSpace(out.String())
	if !config.IsBcryptHash(h) || bcrypt.CompareHashAndPassword([]byte(h), []byte("a-long-operator-passphrase")) != nil {
		t.Fatalf("not a hash of the password: %q", h)
	}
	for _, c := range []struct {
		args []string
		in   string
		rc   int
		want string
	}{
		{nil, "short\n", 1, "at least 16 bytes"},
		{[]string{"--cost", "3"}, "a-long-operator-passphrase\n", 1, "cost must be 4..31"},
		{[]string{"a-long-operator-passphrase"}, "", 2, "usage"},
	} {
		out.Reset()
		errOut.Reset()
		if rc := runHashPassword(c.args, strings.NewReader(c.in), &out, &errOut); rc != c.rc || !strings.Contains(errOut.String(), c.want) || out.Len() != 0 {
			t.Errorf("%v %q: rc %d, stderr %q, stdout %q", c.args, c.in, rc, errOut.String(), out.String())
		}
	}
}
