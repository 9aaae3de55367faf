package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestShorten(t *testing.T) {
	for _, c := range []struct {
		in        string
		shortened bool
	}{
		{"", false}, {"ord_1", false}, {strings.Repeat("a", ShortenAbove), false},
		{strings.Repeat("a", ShortenAbove+1), true}, {strings.Repeat("é", ShortenAbove), true}, {strings.Repeat("\xff", 1000), true},
	} {
		shown, digest := Shorten(c.in)
		if !c.shortened {
			if shown != c.in || digest != "" {
				t.Errorf("Shorten(%d bytes) = %q, %q", len(c.in), shown, digest)
			}
			continue
		}
		if digest != Digest(c.in) || len(digest) != 64 || !strings.HasSuffix(shown, Ellipsis) ||
			len(shown) > ShortPrefix+len(Ellipsis) || !strings.HasPrefix(c.in, strings.TrimSuffix(shown, Ellipsis)) {
			t.Errorf("Shorten(%d bytes) = %q, %q", len(c.in), shown, digest)
		}
		if utf8.ValidString(c.in) && !utf8.ValidString(shown) {
			t.Errorf("Shorten cut a character: %q", shown)
		}
	}
}

func TestShortenJSON(t *testing.T) {
	long := strings.Repeat("x", 300)
	in, _ := json.Marshal(map[string]any{"order_id": long, "nested": []any{long, 1.5, map[string]any{long: "v"}}, "n": json.Number("12345678901234567890")})
	out, changed := ShortenJSON(in)
	if !changed || !json.Valid(out) || strings.Contains(string(out), long) || strings.Count(string(out), "sha256:"+Digest(long)) != 3 ||
		!strings.Contains(string(out), "12345678901234567890") {
		t.Fatalf("ShortenJSON: %s (changed %v)", out, changed)
	}
	small := json.RawMessage(`{"order_id":"ord_1","amount_minor":100}`)
	if out, changed := ShortenJSON(small); changed || string(out) != string(small) {
		t.Fatalf("a short value changed: %s", out)
	}
	bad := json.RawMessage(`{"a":"` + long + `"`)
	if out, changed := ShortenJSON(bad); changed || string(out) != string(bad) {
		t.Fatalf("invalid JSON changed: %s", out)
	}
}
