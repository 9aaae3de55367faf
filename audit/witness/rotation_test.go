package witness

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/events/codec"
	"golang.org/x/mod/sumdb/tlog"
)

// sealedLog is a log of real audit records around signed events, so that a
// key rotation in it can be shown to a witness.
type sealedLog struct {
	chain    *audit.Chain
	raws     [][]byte
	rotation int64 // index of the latest rotation record, -1: none
}

func (l *sealedLog) add(t *testing.T, signer codec.Signer, typ string, body any) {
	t.Helper()
	env, err := signer.Seal(typ, audit.KeyRotationVersion, fmt.Sprintf("01JAAAAAAAAAAAAAAAAAAAA%03d", len(l.raws)), "acme", "2026-10-26T09:00:00.000000000Z", body)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := codec.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	rec, rraw, err := audit.Seal("acme", l.chain.Size(), l.chain.PrevHash(), uint64(len(l.raws)+1), audit.KeyRotationSubject("acme"), raw, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.chain.Append(rec, rraw); err != nil {
		t.Fatal(err)
	}
	l.raws = append(l.raws, rraw)
	if _, ok := body.(audit.KeyRotation); ok {
		l.rotation = rec.Index
	}
}

func (l *sealedLog) checkpoint(t *testing.T, key ed25519.PrivateKey) []byte {
	t.Helper()
	s, err := audit.NewNoteSigner(audit.Origin("acme"), key)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := l.chain.Checkpoint(audit.Origin("acme"))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := audit.SignCheckpoint(cp, s)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func (l *sealedLog) ProveTree(_ context.Context, size, oldSize int64) (tlog.TreeProof, error) {
	return l.chain.Tree().ProveTree(size, oldSize)
}

func (l *sealedLog) ProveRotation(_ context.Context, size int64) (audit.KeyChange, bool, error) {
	if l.rotation < 0 || l.rotation >= size {
		return audit.KeyChange{}, false, nil
	}
	p, err := l.chain.Tree().Prove(l.rotation, size)
	return audit.KeyChange{Index: l.rotation, Record: l.raws[l.rotation], Proof: p}, err == nil, err
}

func pub(k ed25519.PrivateKey) string {
	return base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey))
}

func noteKey(t *testing.T, k ed25519.PrivateKey) string {
	t.Helper()
	v, err := audit.NoteVerifierKey(audit.Origin("acme"), k.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestWitnessFollowsKeyRotation: a witness that cosigned the old key's
// checkpoints refuses the new key's (403) until it is shown the rotation
// record, signed by the old key and included in the new checkpoint; it then
// cosigns and keeps the new key in its state, so that it restarts with the
// old keys.json, the new one (both keys) or the new key alone. A rotation
// asserted by an operator, or one that retires a key the witness does not
// trust, is refused.
func TestWitnessFollowsKeyRotation(t *testing.T) {
	oldKey, newKey, lostKey := key("log"), key("log, rotated"), key("log, lost")
	state := filepath.Join(t.TempDir(), "state.json")
	c, err := audit.NewCosigner("witness.test/w1", key("witness"), func() uint64 { return 1767225600 })
	if err != nil {
		t.Fatal(err)
	}
	start := func(keys ...string) (*audit.Witness, string) {
		t.Helper()
		w, err := Open(c, keys, state)
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(Handler(w))
		t.Cleanup(hs.Close)
		return w, hs.URL
	}
	w, url := start(noteKey(t, oldKey))
	l := &sealedLog{chain: audit.NewTreeChain("acme"), rotation: -1}
	old, rotated := codec.NewSigner(oldKey), codec.NewSigner(newKey)
	for i := 0; i < 3; i++ {
		l.add(t, old, audit.TypeKeyRotated, map[string]int{"filler": i})
	}
	client := &Client{URL: url, Key: c.Verifier()}
	if _, err := client.Submit(context.Background(), l, l.checkpoint(t, oldKey)); err != nil {
		t.Fatal(err)
	}

	l.add(t, old, audit.TypeKeyRotated, audit.KeyRotation{From: pub(oldKey), To: pub(newKey), Retired: []string{pub(oldKey)}})
	l.add(t, rotated, audit.TypeKeyRotated, map[string]int{"filler": 4})
	msg := l.checkpoint(t, newKey)
	// A witness client without the rotation gets the 403 of a plain witness.
	_, err = (&Client{URL: url, Key: c.Verifier()}).Submit(context.Background(), TreeProver{l.chain.Tree()}, msg)
	var re *RefusedError
	if !errors.As(err, &re) || re.Status != http.StatusForbidden || re.Kind(5) != RefusalKey {
		t.Fatalf("%v; want 403", err)
	}
	if _, err := client.Submit(context.Background(), l, msg); err != nil {
		t.Fatalf("the rotation was not followed: %v", err)
	}
	if got := w.Key(audit.Origin("acme")); got != noteKey(t, newKey) {
		t.Fatalf("the witness trusts %q, want the new key", got)
	}

	// Restarts with the old keys.json, with both keys, with the new one.
	for _, keys := range [][]string{{noteKey(t, oldKey)}, {noteKey(t, oldKey), noteKey(t, newKey)}, {noteKey(t, newKey)}} {
		_, url := start(keys...)
		l.add(t, rotated, audit.TypeKeyRotated, map[string]int{"filler": int(l.chain.Size())})
		if _, err := (&Client{URL: url, Key: c.Verifier()}).Submit(context.Background(), l, l.checkpoint(t, newKey)); err != nil {
			t.Fatalf("after a restart with %d keys: %v", len(keys), err)
		}
	}

	// A rotation asserted by an operator (the key lost) proves nothing.
	_, url = start(noteKey(t, oldKey))
	asserted := codec.NewSigner(lostKey)
	l.add(t, asserted, audit.TypeKeyRotated, audit.KeyRotation{From: pub(newKey), To: pub(lostKey), Retired: []string{pub(newKey), pub(oldKey)},
		AssertedBy: "ops_alice", ArtifactRef: "INC-42"})
	_, err = (&Client{URL: url, Key: c.Verifier()}).Submit(context.Background(), l, l.checkpoint(t, lostKey))
	if !errors.As(err, &re) || re.Status != http.StatusForbidden || !strings.Contains(re.Reason, "asserted") {
		t.Fatalf("an asserted rotation: %v; want 403 naming the assertion", err)
	}
	// Nor does a rotation that retires a key the witness never trusted.
	stranger := key("stranger")
	l.add(t, codec.NewSigner(stranger), audit.TypeKeyRotated, audit.KeyRotation{From: pub(stranger), To: pub(lostKey), Retired: []string{pub(stranger)}})
	_, err = (&Client{URL: url, Key: c.Verifier()}).Submit(context.Background(), l, l.checkpoint(t, lostKey))
	if !errors.As(err, &re) || re.Status != http.StatusForbidden || !strings.Contains(re.Reason, "does not trust") {
		t.Fatalf("a stranger's rotation: %v; want 403", err)
	}
}

// FuzzParseRotated: an add-rotation body never panics the parser, and a
// parsed one re-encodes to itself.
func FuzzParseRotated(f *testing.F) {
	f.Add([]byte("rotation 3\neyJhIjoxfQ==\n\nold 0\n\nacme\n1\nAAAA\n"))
	f.Add([]byte("rotation 0\neyJhIjoxfQ==\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\nold 5\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n— x y\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rot, req, err := audit.ParseRotated(b)
		if err != nil {
			return
		}
		if got := audit.MarshalRotated(rot, req); string(got) != string(b) {
			t.Fatalf("%q re-encodes to %q", b, got)
		}
	})
}

// TestWitnessCosignsAnEmptyLogFirst: a log's first checkpoint may be of no
// records (a runtime's boot check before anything was recorded): the
// witness takes the empty tree as what it had seen, cosigns it, and then
// the log's growth from it.
func TestWitnessCosignsAnEmptyLogFirst(t *testing.T) {
	hs, c := serve(t, filepath.Join(t.TempDir(), "state.json"))
	l := newLog(t, 3, -1)
	client := &Client{URL: hs.URL, Key: c.Verifier()}
	for _, size := range []int64{0, 0, 3} {
		if _, err := client.Submit(context.Background(), TreeProver{&l.tree}, l.checkpoint(t, size)); err != nil {
			t.Fatalf("checkpoint of %d records: %v", size, err)
		}
	}
}
