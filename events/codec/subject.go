package codec

import (
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"

	"github.com/contextos/ledger/kernel"
)

// SubjectPrefix is the first two tokens of every domain-event subject. The
// stream CTX_EVENTS captures SubjectPrefix + ">".
const SubjectPrefix = "ctx.ev."

// KindExposure is the aggregate kind of the exposure ledger; it is reserved for
// ExposureSubject and refused by Subject.
const KindExposure = "exposure"

// MaxTokenLen is the longest tenant, principal, guarantee id or kind accepted
// by ValidToken.
const MaxTokenLen = 64

// MaxKeyTokenLen is the longest short-form key token; a longer escape switches
// to the hashed long form (see KeyToken).
const MaxKeyTokenLen = 128

// ErrInvalidToken is matched (errors.Is) by every error of ValidToken.
var ErrInvalidToken = errors.New("events: invalid token")

// ValidToken checks an identifier used as one subject token as is (tenant,
// principal, guarantee id, aggregate kind): 1 to 64 bytes of [A-Za-z0-9_-].
// The rule is kernel.ValidToken's; errors match ErrInvalidToken.
func ValidToken(s string) error {
	if err := kernel.ValidToken(s); err != nil {
		return fmt.Errorf("%w %q: %v", ErrInvalidToken, s, err)
	}
	return nil
}

func isAlnumDash(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// KeyToken encodes any string into one legal NATS subject token (only
// [A-Za-z0-9_-], never '.', '*', '>', whitespace or non-ASCII).
//
// Short form: "r" followed by the escape of s, where the bytes [A-Za-z0-9-]
// are kept and every other byte, '_' included, becomes '_' plus two uppercase
// hex digits. Since '_' only ever starts an escape, the escape decodes
// unambiguously: the short form is injective.
//
// Long form, used when the short form would exceed MaxKeyTokenLen bytes: "h"
// followed by the unpadded lowercase base32 of SHA-256(s) (53 bytes). The
// prefixes differ, so the two forms never collide; the long form is
// collision-resistant rather than injective, which is why event bodies carry
// the full resource and loaders compare it.
func KeyToken(s string) string {
	n := 1
	for i := 0; i < len(s); i++ {
		if isAlnumDash(s[i]) {
			n++
		} else {
			n += 3
		}
		if n > MaxKeyTokenLen {
			sum := sha256.Sum256([]byte(s))
			return "h" + lowerBase32.EncodeToString(sum[:])
		}
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('r')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlnumDash(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xF])
	}
	return b.String()
}

// ResourceToken encodes a canonical resource string into the last token of an
// exposure subject. It is KeyToken: injective for resources whose escape fits
// in MaxKeyTokenLen bytes, collision-resistant (SHA-256) beyond.
func ResourceToken(resource string) string { return KeyToken(resource) }

// decodeKeyToken inverts the short form of KeyToken; ok is false for a long
// form or a malformed token. It exists to test injectivity.
func decodeKeyToken(tok string) (s string, ok bool) {
	if len(tok) == 0 || tok[0] != 'r' {
		return "", false
	}
	var b []byte
	for i := 1; i < len(tok); i++ {
		c := tok[i]
		if isAlnumDash(c) {
			b = append(b, c)
			continue
		}
		if c != '_' || i+2 >= len(tok) {
			return "", false
		}
		hi, lo := unhex(tok[i+1]), unhex(tok[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b = append(b, byte(hi<<4|lo))
		i += 2
	}
	return string(b), true
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// ExposureSubject returns the subject of one exposure ledger:
// "ctx.ev.<tenant>.exposure.<guarantee_id>.<resource_token>". Tenant and
// guarantee id must be ValidTokens; the resource must be non-empty.
func ExposureSubject(tenant, guaranteeID, resource string) (string, error) {
	if err := ValidToken(tenant); err != nil {
		return "", fmt.Errorf("tenant: %w", err)
	}
	if err := ValidToken(guaranteeID); err != nil {
		return "", fmt.Errorf("guarantee id: %w", err)
	}
	if resource == "" {
		return "", fmt.Errorf("%w: empty resource", ErrInvalidToken)
	}
	return TenantPrefix(tenant) + KindExposure + "." + guaranteeID + "." + ResourceToken(resource), nil
}

// ExposureWindowSubject is ExposureSubject for the ledger of one calendar
// window, "<exposure subject>.<window>"; an empty window is the guarantee's
// only ledger. A window key is digits, ASCII letters and '-' (2026-12-01,
// 2026-W49, 2026-12).
func ExposureWindowSubject(tenant, guaranteeID, resource, window string) (string, error) {
	s, err := ExposureSubject(tenant, guaranteeID, resource)
	if err != nil || window == "" {
		return s, err
	}
	if len(window) > 16 {
		return "", fmt.Errorf("%w: window %q", ErrInvalidToken, window)
	}
	for _, r := range window {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') {
			return "", fmt.Errorf("%w: window %q", ErrInvalidToken, window)
		}
	}
	return s + "." + window, nil
}

// Subject returns "ctx.ev.<tenant>.<kind>.<KeyToken(key)>..." for the sibling
// aggregates of the exposure ledger (operations, attempts, runs, ...). Tenant
// and kind must be ValidTokens and kind must not be KindExposure, whose
// guarantee-id token is not key-encoded. Keys may be any strings; each becomes
// one token.
func Subject(tenant, kind string, keys ...string) (string, error) {
	if err := ValidToken(tenant); err != nil {
		return "", fmt.Errorf("tenant: %w", err)
	}
	if err := ValidToken(kind); err != nil {
		return "", fmt.Errorf("kind: %w", err)
	}
	if kind == KindExposure {
		return "", fmt.Errorf("%w: kind %q is reserved for ExposureSubject", ErrInvalidToken, kind)
	}
	var b strings.Builder
	b.WriteString(SubjectPrefix)
	b.WriteString(tenant)
	b.WriteByte('.')
	b.WriteString(kind)
	for _, k := range keys {
		b.WriteByte('.')
		b.WriteString(KeyToken(k))
	}
	return b.String(), nil
}

// ValidSubject checks that s is a literal NATS publish subject: non-empty
// dot-separated tokens of printable ASCII other than '*' and '>' (no
// wildcards, no whitespace), at most 1024 bytes.
func ValidSubject(s string) error {
	if s == "" || len(s) > 1024 {
		return fmt.Errorf("events: invalid subject: length must be 1..1024")
	}
	tokStart := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if tokStart {
				return fmt.Errorf("events: invalid subject %q: empty token", s)
			}
			tokStart = true
			continue
		case c <= ' ' || c >= 0x7f || c == '*' || c == '>':
			return fmt.Errorf("events: invalid subject %q: byte %q not allowed", s, c)
		}
		tokStart = false
	}
	if tokStart {
		return fmt.Errorf("events: invalid subject %q: empty token", s)
	}
	return nil
}

// TenantPrefix is what every subject of tenant's events begins with:
// SubjectPrefix, the tenant's token and a dot. TenantPrefix(t) + ">" is
// the NATS filter of the tenant's events.
func TenantPrefix(tenant string) string { return SubjectPrefix + tenant + "." }

// SubjectTenant returns the tenant token of a "ctx.ev.<tenant>...." subject.
func SubjectTenant(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, SubjectPrefix)
	if !ok {
		return "", false
	}
	t, _, _ := strings.Cut(rest, ".")
	return t, true
}
