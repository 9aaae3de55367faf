package config

import (
	"fmt"
	"net/url"
	"regexp"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// The rules below refuse the values a hostile or careless configuration
// would slip past the other checks: endpoints that would carry calls in
// clear text or leak credentials into logs and records, timeouts that
// hold a reservation for years or time every call out, and passwords in
// guessing range. Every section calls them, so a rule has one wording and
// one bound wherever its key is (docs/config.md, docs/operations.md).

// Bounds of the timeouts of calls to providers (capabilities.http.timeout,
// capabilities.mcp.timeout). Below MinProviderTimeout no real provider
// answers, so every call would be unknown; above MaxProviderTimeout a
// reservation waits on a provider that is gone (an attempt's reconcile
// grace is twice its timeout).
const (
	MinProviderTimeout = 100 * time.Millisecond
	MaxProviderTimeout = 5 * time.Minute
)

// MinPasswordBytes is the shortest plaintext password a principal (or the
// runtime's own NATS user) may have: 16 bytes put a password out of online
// guessing range whatever the server's speed. A principal's password may
// instead be a bcrypt hash, which the embedded server checks natively.
const MinPasswordBytes = 16

// bcryptHash is the form the embedded nats-server takes as a bcrypt hash
// (its validBcryptPrefix, with the full 60-byte body of a real hash).
var bcryptHash = regexp.MustCompile(`^\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}$`)

// IsBcryptHash reports whether a configured password is a bcrypt hash
// ($2a$, $2b$ or $2y$) rather than the password itself.
func IsBcryptHash(pw string) bool { return bcryptHash.MatchString(pw) }

// checkPassword refuses a password shorter than MinPasswordBytes; when
// hashOK (a password the embedded server checks) a bcrypt hash is taken
// as it is. A string that starts like a hash but is not one is refused:
// the server would compare it as plaintext, and the operator meant a hash.
func checkPassword(key, pw string, hashOK bool) error {
	if hashOK && len(pw) > 0 && pw[0] == '$' {
		if IsBcryptHash(pw) {
			return nil
		}
		if len(pw) > 3 && pw[:2] == "$2" {
			return fmt.Errorf("%s: not a valid bcrypt hash ($2a$, $2b$ or $2y$, cost 04..31, 60 bytes); make one with `contextosd hash-password`", key)
		}
	}
	if len(pw) < MinPasswordBytes {
		if hashOK {
			return fmt.Errorf("%s must be at least %d bytes or a bcrypt hash (`contextosd hash-password`), not %d bytes", key, MinPasswordBytes, len(pw))
		}
		return fmt.Errorf("%s must be at least %d bytes, not %d", key, MinPasswordBytes, len(pw))
	}
	return nil
}

// checkEndpoint checks the URL of a provider or a witness: http or https
// with a host, no credentials in it (they would be logged and recorded),
// and plain http only to a loopback host unless allowHTTP (said
// explicitly, only for the http adapter's provider).
func checkEndpoint(s string, allowHTTP bool) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: the scheme must be http or https", s)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q: a host is required", s)
	}
	if u.User != nil {
		return fmt.Errorf("%q: credentials in the URL are refused (they would be logged and recorded)", s)
	}
	if u.Scheme == "http" && !isLoopbackHost(u.Hostname()) && !allowHTTP {
		return fmt.Errorf("%q: plain http only to a loopback host; use https", s)
	}
	return nil
}

// checkProviderTimeout checks a call timeout against MinProviderTimeout
// and MaxProviderTimeout.
func checkProviderTimeout(key string, d time.Duration) error {
	if d < MinProviderTimeout || d > MaxProviderTimeout {
		return fmt.Errorf("%s must be %s..%s, not %s", key, MinProviderTimeout, MaxProviderTimeout, d)
	}
	return nil
}

// DefaultBcryptCost is the cost HashPassword uses unless told otherwise
// (bcrypt's default): every check of a login against the hash costs the
// server that work, which slows guessing further, and every connection of
// the principal pays it once.
const DefaultBcryptCost = bcrypt.DefaultCost

// HashPassword makes the bcrypt hash of a principal's password, for its
// password key: the embedded server checks a login against the hash, and
// the configuration no longer holds the password. It refuses a password
// shorter than MinPasswordBytes or longer than bcrypt takes (72 bytes), and
// a cost outside bcrypt's 4..31.
func HashPassword(pw []byte, cost int) (string, error) {
	if len(pw) < MinPasswordBytes {
		return "", fmt.Errorf("a password must be at least %d bytes, not %d", MinPasswordBytes, len(pw))
	}
	if len(pw) > 72 {
		return "", fmt.Errorf("bcrypt takes at most 72 bytes of a password, not %d", len(pw))
	}
	if cost < bcrypt.MinCost || cost > bcrypt.MaxCost {
		return "", fmt.Errorf("the bcrypt cost must be %d..%d, not %d", bcrypt.MinCost, bcrypt.MaxCost, cost)
	}
	h, err := bcrypt.GenerateFromPassword(pw, cost)
	if err != nil {
		return "", err
	}
	return string(h), nil
}
