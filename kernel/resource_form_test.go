package kernel

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/contextos/ledger/wire"
	"golang.org/x/text/unicode/norm"
)

// TestResourceForm: the look-alikes of an id are refused by the forms that
// declare against them, and plain ids pass every form.
func TestResourceForm(t *testing.T) {
	const (
		ok, refused = true, false
	)
	cases := []struct {
		name            string
		id              string
		any, ascii, nfc bool
	}{
		{"plain", "ord_881", ok, ok, ok},
		{"token punctuation", "acct:eu/ord-1.2", ok, ok, ok},
		{"zero-width space", "ord_881\u200b", ok, refused, refused},
		{"zero-width joiner inside", "ord\u200d_881", ok, refused, refused},
		{"bidi override", "ord_\u202e188", ok, refused, refused},
		{"full-width", "ｏｒｄ＿８８１", ok, refused, ok},
		{"NFC accented", "caf\u00e9", ok, refused, ok},
		{"NFD accented", "cafe\u0301", ok, refused, refused},
		{"space", "ord 881", ok, refused, refused},
		{"tab", "ord\t881", ok, refused, refused},
		{"replacement character", "s_\ufffd", ok, refused, refused},
		{"invalid UTF-8", "s_\xff", ok, refused, refused},
		{"Cyrillic o (a confusable the forms do not catch in nfc)", "\u043erd_881", ok, refused, ok},
		{"longest token", strings.Repeat("a", MaxResourceTokenLen), ok, ok, ok},
		{"too long a token", strings.Repeat("a", MaxResourceTokenLen+1), ok, refused, ok},
	}
	for _, c := range cases {
		for _, f := range []struct {
			form ResourceForm
			want bool
		}{{ResourceFormAny, c.any}, {ResourceFormASCIIToken, c.ascii}, {ResourceFormNFC, c.nfc}} {
			r := f.form.CheckResource(c.id)
			if (r == nil) != f.want {
				t.Errorf("%s under %q: %v, want accepted=%v", c.name, f.form, r, f.want)
			}
			if r != nil && r.Code != wire.CodeResourceInvalid {
				t.Errorf("%s under %q: code %s", c.name, f.form, r.Code)
			}
		}
	}
	if r := ResourceForm("nfkc").CheckResource("x"); r == nil || r.Code != wire.CodeDefinitionInvalid {
		t.Fatalf("unknown form: %v", r)
	}
}

// TestDefinitionResourceForm: a definition declares its form (an unknown
// one is invalid), Extract applies it, and a definition without one keeps
// the digest it had before forms existed.
func TestDefinitionResourceForm(t *testing.T) {
	d := Definition{ID: "g", CapabilityIDs: []string{"c"}, ResourcePointer: "/order_id", AmountPointer: "/amount", Limit: 10, Unit: "u"}
	before := d.Digest()
	if got, err := Digest(struct {
		ID              string   `json:"id"`
		CapabilityIDs   []string `json:"capability_ids"`
		ResourcePointer string   `json:"resource_pointer"`
		AmountPointer   string   `json:"amount_pointer"`
		Limit           int64    `json:"limit"`
		Unit            string   `json:"unit"`
	}{d.ID, d.CapabilityIDs, d.ResourcePointer, d.AmountPointer, d.Limit, d.Unit}); err != nil || got != before {
		t.Fatalf("a definition without a form changed digest: %s vs %s", got, before)
	}
	d.ResourceForm = "ascii"
	if r := d.Validate(); r == nil || r.Code != wire.CodeDefinitionInvalid {
		t.Fatalf("unknown form accepted: %v", r)
	}
	d.ResourceForm = ResourceFormASCIIToken
	if d.Validate() != nil || d.Digest() == before {
		t.Fatal("a form must be valid and part of the digest")
	}
	if _, _, r := d.Extract(map[string]any{"order_id": "ord_1\u200b", "amount": json.Number("1")}); r == nil || r.Code != wire.CodeResourceInvalid || !strings.Contains(r.Reason, "/order_id") {
		t.Fatalf("look-alike extracted: %v", r)
	}
	if res, _, r := d.Extract(map[string]any{"order_id": "ord_1", "amount": json.Number("1")}); r != nil || res != "ord_1" {
		t.Fatalf("plain id: %q %v", res, r)
	}
}

// FuzzResourceForm: never panics; an accepted ascii-token id is short
// printable ASCII, and an accepted nfc id is valid UTF-8, NFC and free of
// the characters the form excludes, so two accepted ids that normalize the
// same are the same id.
func FuzzResourceForm(f *testing.F) {
	for _, s := range []string{"ord_881", "ord_881\u200b", "ｏｒｄ", "cafe\u0301", "caf\u00e9", "\xff", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if id == "" {
			return
		}
		if ResourceFormAny.CheckResource(id) != nil {
			t.Fatal("the zero form refused a non-empty id")
		}
		if ResourceFormASCIIToken.CheckResource(id) == nil {
			if len(id) > MaxResourceTokenLen {
				t.Fatalf("long token accepted: %d", len(id))
			}
			for i := 0; i < len(id); i++ {
				if !isResourceTokenByte(id[i]) {
					t.Fatalf("token %q accepted with byte %q", id, id[i])
				}
			}
			if ResourceFormNFC.CheckResource(id) != nil {
				t.Fatalf("an ascii-token id %q is refused by nfc", id)
			}
		}
		if ResourceFormNFC.CheckResource(id) == nil {
			if !utf8.ValidString(id) || !norm.NFC.IsNormalString(id) || strings.ContainsAny(id, "\u200b\u200c\u200d\ufeff\ufffd \t\n") {
				t.Fatalf("nfc accepted %q", id)
			}
		}
	})
}
