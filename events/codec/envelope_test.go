package codec_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

const (
	testType  = "test.thing_happened"
	testType2 = "test.other"
)

func init() {
	codec.Register(testType, 1)
	codec.Register(testType, 2)
	codec.Register(testType2, 1)
}

// goldenSeed is the fixed Ed25519 seed of the golden vector: bytes 0..31.
func goldenSeed() []byte {
	s := make([]byte, ed25519.SeedSize)
	for i := range s {
		s[i] = byte(i)
	}
	return s
}

func goldenSigner(t testing.TB) codec.Signer {
	t.Helper()
	key, err := codec.GenerateKey(bytes.NewReader(goldenSeed()))
	if err != nil {
		t.Fatal(err)
	}
	return codec.NewSigner(key)
}

func goldenEnvelope(t testing.TB) codec.Envelope {
	t.Helper()
	e, err := goldenSigner(t).Seal(testType, 1, "01HZY7Q3J5R8N2B4C6D8E0F1G2", "acme",
		codec.FormatTime(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)),
		map[string]any{"resource": "ord.881 é", "amount": 800, "z": []int{3, 1}, "a": map[string]bool{"y": true, "b": false}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// goldenFile compares got with testdata/name, after writing it there under
// -update, and returns the file's bytes.
func goldenFile(t *testing.T, name string, got []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s changed:\n got %s\nwant %s", name, got, want)
	}
	return want
}

// goldenBatch is three events sealed under one signature.
func goldenBatch(t testing.TB) []codec.Envelope {
	t.Helper()
	at := codec.FormatTime(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))
	envs, err := goldenSigner(t).SealAll([]codec.Draft{
		{Type: testType, V: 1, EventID: "01HZY7Q3J5R8N2B4C6D8E0F1G4", Tenant: "acme", Time: at, Body: map[string]any{"resource": "ord.881", "amount": 800}},
		{Type: testType2, V: 1, EventID: "01HZY7Q3J5R8N2B4C6D8E0F1G5", Tenant: "acme", Time: at, Body: map[string]any{"run": "r-1"}},
		{Type: testType, V: 2, EventID: "01HZY7Q3J5R8N2B4C6D8E0F1G6", Tenant: "acme", Time: at, Body: map[string]any{"note": "é"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return envs
}

// TestGoldenBatch pins the batch form: three events, one signature, each
// with its inclusion proof, each verifying from its stored bytes alone.
func TestGoldenBatch(t *testing.T) {
	s := goldenSigner(t)
	var lines []string
	for _, e := range goldenBatch(t) {
		enc, err := codec.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(enc))
	}
	got := []byte(hex.EncodeToString(s.Key.Public().(ed25519.PublicKey)) + "\n" + strings.Join(lines, "\n") + "\n")
	want := goldenFile(t, "golden_batch.txt", got)
	rows := strings.Split(strings.TrimSuffix(string(want), "\n"), "\n")
	pub, _ := hex.DecodeString(rows[0])
	kr := codec.Keyring{}
	kr.Add(pub)
	var sig string
	for i, row := range rows[1:] {
		d, err := codec.Decode([]byte(row))
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if err := kr.Verify(d); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !strings.HasPrefix(d.Proof, fmt.Sprintf("%d.3.", i)) || (sig != "" && d.Sig != sig) {
			t.Fatalf("event %d: proof %q, sig %q (first %q)", i, d.Proof, d.Sig, sig)
		}
		sig = d.Sig
	}
}

// TestBatchSplicesFail: a batch signature covers its events only, each at
// its place: no event verifies with another's proof, without its proof, or
// under another batch's signature.
func TestBatchSplicesFail(t *testing.T) {
	s := goldenSigner(t)
	kr := codec.Keyring{}
	kr.Add(s.Key.Public().(ed25519.PublicKey))
	a := goldenBatch(t)
	b, err := s.SealAll([]codec.Draft{
		{Type: testType, V: 1, EventID: "01HZY7Q3J5R8N2B4C6D8E0F1G7", Tenant: "acme", Time: a[0].Time, Body: map[string]any{"x": 1}},
		{Type: testType, V: 1, EventID: "01HZY7Q3J5R8N2B4C6D8E0F1G8", Tenant: "acme", Time: a[0].Time, Body: map[string]any{"x": 2}},
		{Type: testType, V: 1, EventID: "01HZY7Q3J5R8N2B4C6D8E0F1G9", Tenant: "acme", Time: a[0].Time, Body: map[string]any{"x": 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if err := kr.Verify(a[i]); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	splices := map[string]codec.Envelope{}
	e := a[1]
	e.Proof = a[0].Proof
	splices["another event's proof"] = e
	e = a[1]
	e.Proof = ""
	splices["no proof"] = e
	e = a[1]
	e.Sig = b[1].Sig
	splices["another batch's signature"] = e
	e = a[1]
	e.Proof, e.Sig = b[1].Proof, b[1].Sig
	splices["another batch's proof and signature"] = e
	e = a[1]
	e.Proof = "0" + a[1].Proof[1:]
	splices["its proof at another place"] = e
	for name, e := range splices {
		if err := kr.Verify(e); !errors.Is(err, codec.ErrBadSignature) && !errors.Is(err, codec.ErrInvalidEnvelope) {
			t.Errorf("%s: Verify = %v, want a refusal", name, err)
		}
	}
}

type golden struct {
	Seed         string          `json:"seed_hex"`
	KeyID        string          `json:"key_id"`
	PublicKey    string          `json:"public_key_hex"`
	SigningBytes string          `json:"signing_bytes"`
	Encoded      string          `json:"encoded"`
	Envelope     json.RawMessage `json:"envelope"`
}

func TestGoldenEnvelope(t *testing.T) {
	s := goldenSigner(t)
	e := goldenEnvelope(t)
	enc, err := codec.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := codec.SigningBytes(e)
	if err != nil {
		t.Fatal(err)
	}
	g := golden{
		Seed:         hex.EncodeToString(goldenSeed()),
		KeyID:        s.KeyID,
		PublicKey:    hex.EncodeToString(s.Key.Public().(ed25519.PublicKey)),
		SigningBytes: string(sb),
		Encoded:      string(enc),
		Envelope:     enc,
	}
	got, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	want := goldenFile(t, "golden_envelope.json", got)
	var w golden
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	d, err := codec.Decode([]byte(w.Encoded))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := hex.DecodeString(w.PublicKey)
	kr := codec.Keyring{}
	if kr.Add(pub) != w.KeyID {
		t.Fatal("key id of golden public key differs")
	}
	if err := kr.Verify(d); err != nil {
		t.Fatalf("golden envelope does not verify: %v", err)
	}
	if !strings.Contains(w.Encoded, `"body":{"a":{"b":false,"y":true},"amount":800,"resource":"ord.881 é","z":[3,1]}`) {
		t.Fatalf("body not canonical in %s", w.Encoded)
	}
}

func TestSealVerifyRoundTrip(t *testing.T) {
	s := goldenSigner(t)
	kr := codec.Keyring{}
	kr.Add(s.Key.Public().(ed25519.PublicKey))
	e := goldenEnvelope(t)
	if err := kr.Verify(e); err != nil {
		t.Fatal(err)
	}
	b, err := codec.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	d, err := codec.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := kr.Verify(d); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Resource string          `json:"resource"`
		Amount   int64           `json:"amount"`
		Z        []int           `json:"z"`
		A        map[string]bool `json:"a"`
	}
	if err := codec.DecodeBody(d, &body); err != nil || body.Amount != 800 || body.Resource != "ord.881 é" {
		t.Fatalf("DecodeBody = %+v, %v", body, err)
	}
	var narrow struct {
		Amount int64 `json:"amount"`
	}
	if err := codec.DecodeBody(d, &narrow); err == nil {
		t.Fatal("DecodeBody accepted unknown fields")
	}
}

func TestTamperingFailsVerification(t *testing.T) {
	s := goldenSigner(t)
	other, err := codec.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{9}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	kr := codec.Keyring{}
	kr.Add(s.Key.Public().(ed25519.PublicKey))
	otherID := kr.Add(other.Public().(ed25519.PublicKey))
	for _, base := range []codec.Envelope{goldenEnvelope(t), goldenBatch(t)[0]} {
		tamperAll(t, kr, base, otherID)
	}
	base := goldenEnvelope(t)
	e := base
	e.KeyID = "ed25519:0000000000000000"
	var uk *codec.UnknownKeyError
	if err := kr.Verify(e); !errors.Is(err, codec.ErrUnknownKey) || !errors.As(err, &uk) || uk.KeyID != e.KeyID {
		t.Errorf("unknown key: %v", err)
	}
	var se *codec.SignatureError
	e = base
	e.Tenant = "globex"
	if err := kr.Verify(e); !errors.As(err, &se) || se.EventID != e.EventID {
		t.Errorf("SignatureError not typed: %v", err)
	}
}

// tamperAll changes each field of base in turn and expects a bad signature.
func tamperAll(t *testing.T, kr codec.Keyring, base codec.Envelope, otherID string) {
	t.Helper()
	tampers := map[string]func(e *codec.Envelope){
		"type":     func(e *codec.Envelope) { e.Type = testType2 },
		"v":        func(e *codec.Envelope) { e.V = 2 },
		"event_id": func(e *codec.Envelope) { e.EventID = "01HZY7Q3J5R8N2B4C6D8E0F1G3" },
		"tenant":   func(e *codec.Envelope) { e.Tenant = "globex" },
		"time":     func(e *codec.Envelope) { e.Time = "2026-01-02T03:04:05.000000007Z" },
		"body":     func(e *codec.Envelope) { e.Body = json.RawMessage(`{"amount":801}`) },
		"key_id":   func(e *codec.Envelope) { e.KeyID = otherID },
		"sig": func(e *codec.Envelope) {
			b := []byte(e.Sig)
			b[3] ^= 'A' ^ 'B'
			if b[3] == e.Sig[3] {
				b[3] = 'C'
			}
			e.Sig = string(b)
		},
	}
	if base.Proof != "" {
		tampers["proof"] = func(e *codec.Envelope) {
			b := []byte(e.Proof)
			b[len(b)-2] ^= 'A' ^ 'B'
			if b[len(b)-2] == e.Proof[len(b)-2] {
				b[len(b)-2] = 'C'
			}
			e.Proof = string(b)
		}
	}
	for field, tamper := range tampers {
		e := base
		tamper(&e)
		if err := kr.Verify(e); !errors.Is(err, codec.ErrBadSignature) {
			t.Errorf("tampered %s (proof %q): Verify = %v, want ErrBadSignature", field, base.Proof, err)
		}
	}
}

// TestEveryByteChangeRejected: any one-byte change to the golden encoding
// fails to decode or fails to verify (age/sumdb-style mangling).
func TestEveryByteChangeRejected(t *testing.T) {
	s := goldenSigner(t)
	kr := codec.Keyring{}
	kr.Add(s.Key.Public().(ed25519.PublicKey))
	for _, e := range []codec.Envelope{goldenEnvelope(t), goldenBatch(t)[2]} {
		b, err := codec.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		everyByteChange(t, kr, b)
	}
}

func everyByteChange(t *testing.T, kr codec.Keyring, b []byte) {
	t.Helper()
	for i := range b {
		for _, repl := range []byte{b[i] ^ 0x01, b[i] ^ 0x20, ' ', '0', 'A'} {
			if repl == b[i] {
				continue
			}
			m := bytes.Clone(b)
			m[i] = repl
			e, err := codec.Decode(m)
			if err == nil {
				err = kr.Verify(e)
			}
			if err == nil {
				t.Fatalf("byte %d %q -> %q accepted: %s", i, b[i], repl, m)
			}
		}
	}
}

func reasonOf(err error) codec.Reason {
	var ee *codec.EnvelopeError
	if errors.As(err, &ee) {
		return ee.Reason
	}
	return ""
}

func TestDecodeStrict(t *testing.T) {
	e := goldenEnvelope(t)
	good, err := codec.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	g := string(good)
	reseal := func(typ string, v int) string {
		x, err := goldenSigner(t).Seal(typ, v, e.EventID, e.Tenant, e.Time, e.Body)
		if err != nil {
			t.Fatal(err)
		}
		x.Type = typ
		b, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		c, err := kernel.Canonical(json.RawMessage(b))
		if err != nil {
			t.Fatal(err)
		}
		return string(c)
	}
	unregType := strings.Replace(reseal(testType, 1), testType, "test.unregistered", 1)
	unregVersion := strings.Replace(g, `"v":1`, `"v":3`, 1)
	cases := []struct {
		name string
		in   string
		want codec.Reason
	}{
		{"unknown type", unregType, codec.ReasonUnregistered},
		{"unknown version", unregVersion, codec.ReasonUnregistered},
		{"trailing object", g + "{}", codec.ReasonTrailingData},
		{"trailing garbage", g + "x", codec.ReasonTrailingData},
		{"trailing newline", g + "\n", codec.ReasonNonCanonical},
		{"leading space", " " + g, codec.ReasonNonCanonical},
		{"indented", indent(t, good), codec.ReasonNonCanonical},
		{"keys reordered", `{"v":1,` + strings.Replace(g[1:], `"v":1,`, "", 1), codec.ReasonNonCanonical},
		{"escaped char", strings.Replace(g, `"acme"`, `"\u0061cme"`, 1), codec.ReasonNonCanonical},
		{"duplicate key", strings.Replace(g, `"tenant":"acme"`, `"tenant":"acme","tenant":"acme"`, 1), codec.ReasonNonCanonical},
		{"number form", strings.Replace(g, `"v":1`, `"v":1.0`, 1), codec.ReasonMalformed},
		{"unknown field", strings.Replace(g, `"v":1`, `"v":1,"x":1`, 1), codec.ReasonUnknownField},
		{"case-folded field", strings.Replace(g, `"tenant"`, `"Tenant"`, 1), codec.ReasonNonCanonical},
		{"missing field", strings.Replace(g, `"tenant":"acme",`, "", 1), codec.ReasonMissingField},
		{"empty tenant", strings.Replace(g, `"tenant":"acme"`, `"tenant":""`, 1), codec.ReasonMissingField},
		{"bad tenant", strings.Replace(g, `"tenant":"acme"`, `"tenant":"ac.me"`, 1), codec.ReasonInvalidField},
		{"lowercase ulid", strings.Replace(g, e.EventID, strings.ToLower(e.EventID), 1), codec.ReasonInvalidField},
		{"short time", strings.Replace(g, e.Time, "2026-01-02T03:04:05Z", 1), codec.ReasonInvalidField},
		{"offset time", strings.Replace(g, e.Time, "2026-01-02T03:04:05.000000006+00:00", 1), codec.ReasonInvalidField},
		{"body array", strings.Replace(g, string(e.Body), "[1]", 1), codec.ReasonBodyNotObject},
		{"body null", strings.Replace(g, string(e.Body), "null", 1), codec.ReasonBodyNotObject},
		{"padded sig", strings.Replace(g, e.Sig, e.Sig+"==", 1), codec.ReasonInvalidField},
		{"v zero", strings.Replace(g, `"v":1`, `"v":0`, 1), codec.ReasonInvalidField},
		{"not an object", `[1,2]`, codec.ReasonMalformed},
		{"empty", ``, codec.ReasonMalformed},
		{"null", `null`, codec.ReasonMalformed},
		{"too large", `{"type":"` + strings.Repeat("a", codec.MaxEnvelopeSize) + `"}`, codec.ReasonTooLarge},
	}
	for _, c := range cases {
		_, err := codec.Decode([]byte(c.in))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !errors.Is(err, codec.ErrInvalidEnvelope) || reasonOf(err) != c.want {
			t.Errorf("%s: %v (reason %q), want reason %q", c.name, err, reasonOf(err), c.want)
		}
	}
	if _, err := codec.Decode(good); err != nil {
		t.Fatalf("good envelope refused: %v", err)
	}
}

func indent(t *testing.T, b []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", " "); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestSealRefusesInvalid(t *testing.T) {
	s := goldenSigner(t)
	const id, tm = "01HZY7Q3J5R8N2B4C6D8E0F1G2", "2026-01-02T03:04:05.000000006Z"
	for name, call := range map[string]func() error{
		"unregistered": func() error { _, err := s.Seal("test.nope", 1, id, "acme", tm, map[string]int{}); return err },
		"bad type":     func() error { _, err := s.Seal("Test", 1, id, "acme", tm, map[string]int{}); return err },
		"version 0":    func() error { _, err := s.Seal(testType, 0, id, "acme", tm, map[string]int{}); return err },
		"body array":   func() error { _, err := s.Seal(testType, 1, id, "acme", tm, []int{1}); return err },
		"body nil":     func() error { _, err := s.Seal(testType, 1, id, "acme", tm, nil); return err },
		"bad id":       func() error { _, err := s.Seal(testType, 1, "x", "acme", tm, map[string]int{}); return err },
		"bad time":     func() error { _, err := s.Seal(testType, 1, id, "acme", "yesterday", map[string]int{}); return err },
		"bad tenant":   func() error { _, err := s.Seal(testType, 1, id, "a b", tm, map[string]int{}); return err },
		"wrong key id": func() error {
			_, err := codec.Signer{KeyID: "ed25519:0", Key: s.Key}.Seal(testType, 1, id, "acme", tm, map[string]int{})
			return err
		},
	} {
		if err := call(); err == nil {
			t.Errorf("%s: sealed", name)
		}
	}
	// A raw body is canonicalized before signing.
	e, err := s.Seal(testType, 1, id, "acme", tm, json.RawMessage(` { "b" : 1 , "a" : 2 } `))
	if err != nil || string(e.Body) != `{"a":2,"b":1}` {
		t.Fatalf("raw body: %s %v", e.Body, err)
	}
}

func TestRegister(t *testing.T) {
	if !codec.Registered(testType, 2) || codec.Registered(testType, 3) {
		t.Fatal("Registered wrong")
	}
	if !codec.Registered(kernel.TypeExposureReserved, kernel.EventVersion) {
		t.Fatal("kernel event types are not registered")
	}
	for _, bad := range []struct {
		typ string
		v   int
	}{{"", 1}, {"A.b", 1}, {"a..b", 1}, {"a.", 1}, {"a", 0}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q, %d) did not panic", bad.typ, bad.v)
				}
			}()
			codec.Register(bad.typ, bad.v)
		}()
	}
}

func FuzzDecode(f *testing.F) {
	good, err := codec.Encode(goldenEnvelope(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	for _, e := range goldenBatch(f) {
		b, err := codec.Encode(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(bytes.Replace(b, []byte(`"proof":"`), []byte(`"proof":"0`), 1))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"type":"test.thing_happened","v":1}`))
	f.Add(append(bytes.Clone(good), '{', '}'))
	f.Add(bytes.Replace(good, []byte(`"v":1`), []byte(`"v":2`), 1))
	f.Add([]byte(`{"body":{"a":1e400}}`))
	f.Add([]byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := codec.Decode(b)
		if err != nil {
			if !errors.Is(err, codec.ErrInvalidEnvelope) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again, err := codec.Encode(e)
		if err != nil {
			t.Fatalf("decoded envelope does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("decode-encode changed the bytes:\n in %q\nout %q", b, again)
		}
		// The store's decode memo rests on this: bytes Encode made decode
		// to the very envelope they were made from.
		if d, err := codec.Decode(again); err != nil || !reflect.DeepEqual(d, e) {
			t.Fatalf("encode-decode changed the envelope: %+v, %v", d, err)
		}
	})
}

// TestEncodeChecksBody: Encode stores a body only in its canonical form,
// whether the one-pass check vouches for it or the JCS comparison decides.
func TestEncodeChecksBody(t *testing.T) {
	e := goldenEnvelope(t)
	for _, c := range []struct {
		name, body string
		want       codec.Reason // "" accepted
	}{
		{"canonical", `{"a":1,"b":[true,null,"x"],"c":{"d":-5}}`, ""},
		{"canonical, a fraction (past the one-pass check)", `{"a":1.5}`, ""},
		{"canonical, a non-ASCII name (past the one-pass check)", `{"é":1}`, ""},
		{"members out of order", `{"b":1,"a":2}`, codec.ReasonNonCanonical},
		{"whitespace", `{"a": 1}`, codec.ReasonNonCanonical},
		{"escaped string", `{"a":"\u0061"}`, codec.ReasonNonCanonical},
		{"exponent", `{"a":1e2}`, codec.ReasonNonCanonical},
		{"member twice", `{"a":1,"a":1}`, codec.ReasonInvalidField},
		{"not JSON", `{"a":}`, codec.ReasonInvalidField},
		{"trailing bytes", `{"a":1}x`, codec.ReasonInvalidField},
	} {
		e.Body = json.RawMessage(c.body)
		_, err := codec.Encode(e)
		var ee *codec.EnvelopeError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errors.As(err, &ee) || ee.Reason != c.want || ee.Field != "body"):
			t.Errorf("%s: %v, want %s on body", c.name, err, c.want)
		}
	}
}

// FuzzEncodeBody: Encode accepts a body exactly when it is a JSON object
// that kernel.Canonical leaves byte for byte as it is.
func FuzzEncodeBody(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"b":1,"a":2}`, `{"a":1.5}`, `{"é":"\u0061"}`, `{"a":{"b":[1,{"c":null}]}}`, `{"a":1,"a":1}`, `{}`, `[]`, `{"a":1}x`} {
		f.Add([]byte(s))
	}
	e := goldenEnvelope(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > codec.MaxEnvelopeSize/2 {
			t.Skip("past the envelope's size bound")
		}
		e := e
		e.Body = body
		_, err := codec.Encode(e)
		c, cerr := kernel.Canonical(json.RawMessage(body))
		want := len(body) > 0 && body[0] == '{' && cerr == nil && bytes.Equal(c, body)
		if (err == nil) != want {
			t.Fatalf("Encode of body %q: %v; canonical form %q (%v)", body, err, c, cerr)
		}
	})
}

// timeByParse is the definition ValidTime answers for: what time.Parse
// accepts in TimeLayout and Format writes back unchanged.
func timeByParse(s string) bool {
	t, err := time.Parse(codec.TimeLayout, s)
	return err == nil && t.Format(codec.TimeLayout) == s
}

var timeSeeds = []string{
	"2026-12-03T13:05:00.123456789Z", "0000-01-01T00:00:00.000000000Z", "9999-12-31T23:59:59.999999999Z",
	"2024-02-29T00:00:00.000000000Z", "2023-02-29T00:00:00.000000000Z", "2000-02-29T00:00:00.000000000Z",
	"2100-02-29T00:00:00.000000000Z", "2026-04-31T00:00:00.000000000Z", "2026-00-10T00:00:00.000000000Z",
	"2026-13-10T00:00:00.000000000Z", "2026-01-00T00:00:00.000000000Z", "2026-01-10T24:00:00.000000000Z",
	"2026-01-10T23:60:00.000000000Z", "2026-01-10T23:59:60.000000000Z", "2026-01-10T23:59:59.00000000Z",
	"2026-01-10T23:59:59.0000000000Z", "2026-01-10 23:59:59.000000000Z", "2026-01-10T23:59:59.000000000+",
	"2026-01-10T23:59:59,000000000Z", "+026-01-10T23:59:59.000000000Z", "2026-1-10T23:59:59.0000000000Z",
	"2026-01-10T23:59:59.000000000z", "２026-01-10T23:59:59.000000000Z", "",
}

// TestValidTime: the shape and the calendar, as time.Parse and Format see
// them.
func TestValidTime(t *testing.T) {
	valid := 0
	for _, s := range timeSeeds {
		got, want := codec.ValidTime(s) == nil, timeByParse(s)
		if got != want {
			t.Errorf("ValidTime(%q) = %v, time.Parse and Format say %v", s, got, want)
		}
		if got {
			valid++
		}
	}
	if valid != 5 {
		t.Errorf("%d seeds valid, want 5", valid)
	}
}

func FuzzValidTime(f *testing.F) {
	for _, s := range timeSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := codec.ValidTime(s) == nil, timeByParse(s); got != want {
			t.Fatalf("ValidTime(%q) = %v, time.Parse and Format say %v", s, got, want)
		}
	})
}
