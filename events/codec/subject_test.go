package codec

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func legalToken(tok string) bool {
	if tok == "" {
		return false
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !isAlnumDash(c) && c != '_' {
			return false
		}
	}
	return true
}

func TestResourceTokenDistinct(t *testing.T) {
	long := strings.Repeat("ord_", 40)
	inputs := []string{
		"ord.1", "ord_1", "ORD_1", "ord 1", "ord>1", "ord*1", "ord-1", "ord1", "ord_2E1", "ord_5F1",
		"r", "h", "_", "__", "_5F", "ord\t1", "ord\x001", "ord\xff1", "órd_1", "ord_１", "注文1", "🧾",
		long, long + "x", strings.Repeat("a", 127), strings.Repeat("a", 128), strings.Repeat(".", 42), strings.Repeat(".", 43),
	}
	seen := map[string]string{}
	for _, in := range inputs {
		tok := ResourceToken(in)
		if !legalToken(tok) {
			t.Errorf("ResourceToken(%q) = %q: not a legal token", in, tok)
		}
		if len(tok) > MaxKeyTokenLen {
			t.Errorf("ResourceToken(%q) has %d bytes", in, len(tok))
		}
		if prev, dup := seen[tok]; dup {
			t.Errorf("ResourceToken(%q) = ResourceToken(%q) = %q", in, prev, tok)
		}
		seen[tok] = in
	}
}

func TestResourceTokenForms(t *testing.T) {
	for in, want := range map[string]string{
		"ord_881":    "rord_5F881",
		"ord.1":      "rord_2E1",
		"ord 1":      "rord_201",
		"ord>1":      "rord_3E1",
		"ord*1":      "rord_2A1",
		"Ab-9":       "rAb-9",
		"é":          "r_C3_A9",
		"":           "r",
		"a_b.c d/e":  "ra_5Fb_2Ec_20d_2Fe",
		"refund:800": "rrefund_3A800",
	} {
		if got := ResourceToken(in); got != want {
			t.Errorf("ResourceToken(%q) = %q, want %q", in, got, want)
		}
		if back, ok := decodeKeyToken(ResourceToken(in)); !ok || back != in {
			t.Errorf("decode(ResourceToken(%q)) = %q, %v", in, back, ok)
		}
	}
	// The short form stops at 128 bytes; beyond, the hashed long form.
	fits := strings.Repeat("a", 127)
	if tok := ResourceToken(fits); tok != "r"+fits {
		t.Errorf("127 plain bytes: %q", tok)
	}
	over := strings.Repeat("a", 128)
	tok := ResourceToken(over)
	if !strings.HasPrefix(tok, "h") || len(tok) != 53 || !legalToken(tok) {
		t.Errorf("128 plain bytes: %q (%d bytes)", tok, len(tok))
	}
	if tok != ResourceToken(strings.Clone(over)) {
		t.Error("long form is not deterministic")
	}
	if ResourceToken(strings.Repeat(".", 42)) != "r"+strings.Repeat("_2E", 42) || ResourceToken(strings.Repeat(".", 43))[0] != 'h' {
		t.Error("escape length not counted against the limit")
	}
}

func TestExposureSubject(t *testing.T) {
	s, err := ExposureSubject("acme", "refunds-per-order", "ord.881")
	if err != nil || s != "ctx.ev.acme.exposure.refunds-per-order.rord_2E881" {
		t.Fatalf("ExposureSubject = %q, %v", s, err)
	}
	if err := ValidSubject(s); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][3]string{
		{"", "g", "r"}, {"ac.me", "g", "r"}, {"acme", "g*", "r"}, {"acme", "g", ""},
		{strings.Repeat("t", 65), "g", "r"}, {"acme", "g h", "r"}, {"acme", "g>", "r"},
	} {
		if _, err := ExposureSubject(c[0], c[1], c[2]); err == nil {
			t.Errorf("ExposureSubject(%q, %q, %q) accepted", c[0], c[1], c[2])
		} else if !errors.Is(err, ErrInvalidToken) {
			t.Errorf("ExposureSubject(%q, %q, %q): %v does not match ErrInvalidToken", c[0], c[1], c[2], err)
		}
	}
}

func TestSubject(t *testing.T) {
	s, err := Subject("acme", "operation", "run 1", "op.key")
	if err != nil || s != "ctx.ev.acme.operation.rrun_201.rop_2Ekey" {
		t.Fatalf("Subject = %q, %v", s, err)
	}
	if s, err := Subject("acme", "killswitch"); err != nil || s != "ctx.ev.acme.killswitch" {
		t.Fatalf("Subject without keys = %q, %v", s, err)
	}
	if _, err := Subject("acme", KindExposure, "g", "r"); err == nil {
		t.Fatal("Subject accepted the reserved exposure kind")
	}
	if _, err := Subject("acme", "a.b", "k"); err == nil {
		t.Fatal("Subject accepted a kind with a dot")
	}
	if KeyToken("x") != ResourceToken("x") {
		t.Fatal("KeyToken and ResourceToken differ")
	}
}

func TestValidToken(t *testing.T) {
	for _, ok := range []string{"acme", "A-Z_0-9", strings.Repeat("x", 64)} {
		if err := ValidToken(ok); err != nil {
			t.Errorf("ValidToken(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", 65), "a.b", "a*", "a>", "a b", "é", "a\n"} {
		if err := ValidToken(bad); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("ValidToken(%q) = %v", bad, err)
		}
	}
}

func TestValidSubject(t *testing.T) {
	for _, ok := range []string{"a", "ctx.ev.acme.x.ry", "$JS.x"} {
		if err := ValidSubject(ok); err != nil {
			t.Errorf("ValidSubject(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "a.", ".a", "a..b", "a.*", "a.>", "a b", "a\tb", "é", strings.Repeat("a", 1025)} {
		if err := ValidSubject(bad); err == nil {
			t.Errorf("ValidSubject(%q) accepted", bad)
		}
	}
}

// FuzzResourceToken: every token is legal, and two different resources never
// share a token (for short forms, the token decodes back to the resource).
func FuzzResourceToken(f *testing.F) {
	for _, s := range []string{"ord.1", "ord_1", "ORD_1", "ord 1", "ord>1", "ord*1", "注文", "_5F", strings.Repeat("z", 200)} {
		f.Add(s, s+"_")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ta, tb := ResourceToken(a), ResourceToken(b)
		for _, tok := range []string{ta, tb} {
			if !legalToken(tok) || len(tok) > MaxKeyTokenLen || !utf8.ValidString(tok) {
				t.Fatalf("illegal token %q", tok)
			}
			if strings.ContainsAny(tok, ".*> \t\r\n") {
				t.Fatalf("token %q holds a subject metacharacter", tok)
			}
		}
		if a != b && ta == tb {
			t.Fatalf("collision: %q and %q both give %q", a, b, ta)
		}
		if a == b && ta != tb {
			t.Fatalf("not deterministic: %q gives %q and %q", a, ta, tb)
		}
		if back, ok := decodeKeyToken(ta); ok && back != a {
			t.Fatalf("short form %q of %q decodes to %q", ta, a, back)
		} else if !ok && ta[0] != 'h' {
			t.Fatalf("token %q of %q is neither a decodable short form nor a long form", ta, a)
		}
	})
}
