package kernel

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/contextos/ledger/wire"
	"golang.org/x/text/unicode/norm"
)

// ResourceForm is the form a guarantee declares for its resource ids. A
// ceiling is kept per exact string: "ord_1", "ord_1" followed by a zero-width
// space, the full-width "ｏｒｄ＿１" and an NFD spelling of an accented id
// are four resources with four ceilings, although a person (and often the
// provider) reads them as one. A form refuses the look-alikes instead of
// giving them their own ceiling. The zero value accepts any non-empty
// string, as before forms existed.
type ResourceForm string

// The resource forms.
const (
	// ResourceFormAny accepts any non-empty string.
	ResourceFormAny ResourceForm = ""
	// ResourceFormASCIIToken accepts 1..MaxResourceTokenLen bytes of ASCII
	// letters, digits and "-_.:/": no look-alike can be spelled in it.
	ResourceFormASCIIToken ResourceForm = "ascii-token"
	// ResourceFormNFC accepts Unicode text in Normalization Form C with no
	// control, format (zero-width, bidirectional), whitespace or
	// replacement (U+FFFD) characters. It leaves compatibility forms such
	// as full-width letters alone; ascii-token refuses those too.
	ResourceFormNFC ResourceForm = "nfc"
)

// MaxResourceTokenLen bounds an ascii-token resource id.
const MaxResourceTokenLen = 256

// Valid reports whether f is a known form.
func (f ResourceForm) Valid() bool {
	switch f {
	case ResourceFormAny, ResourceFormASCIIToken, ResourceFormNFC:
		return true
	}
	return false
}

// CheckResource refuses, with CodeResourceInvalid, a resource id outside
// the form. It assumes id is non-empty (Extract refuses an empty one).
func (f ResourceForm) CheckResource(id string) *Refusal {
	switch f {
	case ResourceFormAny:
		return nil
	case ResourceFormASCIIToken:
		if len(id) > MaxResourceTokenLen {
			return refuse(wire.CodeResourceInvalid, "resource id of %d bytes exceeds the ascii-token form's %d", len(id), MaxResourceTokenLen)
		}
		for i := 0; i < len(id); i++ {
			if c := id[i]; !isResourceTokenByte(c) {
				return refuse(wire.CodeResourceInvalid, "resource id is not an ascii-token (letters, digits and -_.:/): byte %d is %s", i, describeByte(id, i))
			}
		}
		return nil
	case ResourceFormNFC:
		for i, r := range id {
			switch {
			case r == utf8.RuneError:
				return refuse(wire.CodeResourceInvalid, "resource id holds an invalid or replacement character at byte %d", i)
			case unicode.IsControl(r), unicode.Is(unicode.Cf, r), unicode.IsSpace(r):
				return refuse(wire.CodeResourceInvalid, "resource id holds %U (a control, format or space character) at byte %d", r, i)
			}
		}
		if !norm.NFC.IsNormalString(id) {
			return refuse(wire.CodeResourceInvalid, "resource id is not in Unicode Normalization Form C (send %q)", norm.NFC.String(id))
		}
		return nil
	}
	return refuse(wire.CodeDefinitionInvalid, "unknown resource_form %q", string(f))
}

func isResourceTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c == '-' || c == '_' || c == '.' || c == ':' || c == '/'
}

func describeByte(s string, i int) string {
	if s[i] < utf8.RuneSelf {
		return fmt.Sprintf("%q", s[i])
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return fmt.Sprintf("%U", r)
}
