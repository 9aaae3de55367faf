package witness

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/ledger/audit"
	"golang.org/x/mod/sumdb/note"
)

func key(label string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(label))
	return ed25519.NewKeyFromSeed(seed[:])
}

// logOf is a log of n synthetic records; variant changes record fork..n-1.
type logOf struct {
	tree   audit.Tree
	signer note.Signer
}

func newLog(t *testing.T, n int, fork int) *logOf {
	t.Helper()
	s, err := audit.NewNoteSigner(audit.Origin("acme"), key("log"))
	if err != nil {
		t.Fatal(err)
	}
	l := &logOf{signer: s}
	for i := 0; i < n; i++ {
		rec := fmt.Sprintf("record %d", i)
		if fork >= 0 && i >= fork {
			rec += " (rewritten)"
		}
		if err := l.tree.Append(audit.RecordHash([]byte(rec))); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func (l *logOf) checkpoint(t *testing.T, size int64) []byte {
	t.Helper()
	root, err := l.tree.Root(size)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := audit.SignCheckpoint(audit.Checkpoint{Origin: audit.Origin("acme"), Size: size, Root: root}, l.signer)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func logKey(t *testing.T) string {
	t.Helper()
	k, err := audit.NoteVerifierKey(audit.Origin("acme"), key("log").Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serve(t *testing.T, statePath string) (*httptest.Server, *audit.Cosigner) {
	t.Helper()
	c, err := audit.NewCosigner("witness.test/w1", key("witness"), func() uint64 { return 1767225600 })
	if err != nil {
		t.Fatal(err)
	}
	w, err := Open(c, []string{logKey(t)}, statePath)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(Handler(w))
	t.Cleanup(hs.Close)
	return hs, c
}

// TestWitnessCosignsConsistentAndRefusesForks: over real HTTP on loopback,
// a witness cosigns a log's checkpoints as it grows (learning nothing but
// the log key and the consistency proofs), refuses a shrunk log, a fork at
// the same size and a fork that grew, says why, and keeps refusing after a
// restart from its state file.
func TestWitnessCosignsConsistentAndRefusesForks(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	hs, c := serve(t, state)
	ctx := context.Background()
	honest := newLog(t, 20, -1)
	client := &Client{URL: hs.URL, Key: c.Verifier()}
	for _, size := range []int64{5, 12, 20} {
		signed := honest.checkpoint(t, size)
		line, err := client.Submit(ctx, TreeProver{&honest.tree}, signed)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		o, err := audit.OpenCheckpoint(audit.AddCosignatures(signed, line), note.VerifierList(mustVerifier(t, logKey(t))), []*audit.Cosigner{c.Verifier()})
		if err != nil || len(o.Cosigned) != 1 {
			t.Fatalf("size %d: cosigned note does not open: %v", size, err)
		}
	}

	refused := func(l *logOf, size int64, status int, why string) {
		t.Helper()
		// A fresh client (a republished log knows nothing of the witness).
		_, err := (&Client{URL: hs.URL, Key: c.Verifier()}).Submit(ctx, TreeProver{&l.tree}, l.checkpoint(t, size))
		var re *RefusedError
		if !errors.As(err, &re) || re.Status != status || !strings.Contains(re.Reason, why) {
			t.Fatalf("size %d: %v; want a refusal %d naming %q", size, err, status, why)
		}
	}
	// The deletion and republish: 12 of the 20 records again.
	refused(newLog(t, 12, -1), 12, http.StatusConflict, "more than this checkpoint")
	// The same size, another history.
	refused(newLog(t, 20, 7), 20, http.StatusConflict, "fork")
	// Another history that grew past the witness's size.
	refused(newLog(t, 25, 7), 25, http.StatusUnprocessableEntity, "not a prefix")

	// The state survives a restart.
	hs.Close()
	hs2, c2 := serve(t, state)
	_, err := (&Client{URL: hs2.URL, Key: c2.Verifier()}).Submit(ctx, TreeProver{&newLog(t, 25, 7).tree}, newLog(t, 25, 7).checkpoint(t, 25))
	if err == nil || !strings.Contains(err.Error(), "not a prefix") {
		t.Fatalf("after a restart the fork was not refused: %v", err)
	}
	grown := newLog(t, 30, -1)
	if _, err := (&Client{URL: hs2.URL, Key: c2.Verifier()}).Submit(ctx, TreeProver{&grown.tree}, grown.checkpoint(t, 30)); err != nil {
		t.Fatalf("the honest log after a restart: %v", err)
	}
}

// TestWitnessRefusesUnknownLogAndBadSignature: 404 for a log the witness
// does not know, 403 for a checkpoint its log did not sign.
func TestWitnessRefusesUnknownLogAndBadSignature(t *testing.T) {
	hs, c := serve(t, filepath.Join(t.TempDir(), "state.json"))
	l := newLog(t, 3, -1)
	other, err := audit.NewNoteSigner(audit.Origin("beta"), key("log"))
	if err != nil {
		t.Fatal(err)
	}
	root, _ := l.tree.Root(3)
	beta, err := audit.SignCheckpoint(audit.Checkpoint{Origin: audit.Origin("beta"), Size: 3, Root: root}, other)
	if err != nil {
		t.Fatal(err)
	}
	forger, err := audit.NewNoteSigner(audit.Origin("acme"), key("not the log"))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := audit.SignCheckpoint(audit.Checkpoint{Origin: audit.Origin("acme"), Size: 3, Root: root}, forger)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		note   []byte
		status int
	}{{beta, http.StatusNotFound}, {forged, http.StatusForbidden}} {
		_, err := (&Client{URL: hs.URL, Key: c.Verifier()}).Submit(context.Background(), TreeProver{&l.tree}, tc.note)
		var re *RefusedError
		if !errors.As(err, &re) || re.Status != tc.status {
			t.Fatalf("%v; want %d", err, tc.status)
		}
	}
}

func mustVerifier(t *testing.T, vkey string) note.Verifier {
	t.Helper()
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// FuzzParseAddCheckpoint: a request body never panics the parser, and a
// parsed one re-encodes to itself.
func FuzzParseAddCheckpoint(f *testing.F) {
	f.Add([]byte("old 0\n\nacme\n1\nAAAA\n"))
	f.Add([]byte("old 5\n" + strings.Repeat("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n", 2) + "\n— x y\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := audit.ParseAddCheckpoint(b)
		if err != nil {
			return
		}
		if got := a.Marshal(); string(got) != string(b) {
			t.Fatalf("%q re-encodes to %q", b, got)
		}
	})
}

// FuzzParseState: a state file never panics the parser, and a parsed one
// is written back with the same logs.
func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"v":1,"logs":[]}`))
	f.Add([]byte(`{"v":1,"logs":[{"origin":"contextos/audit/acme","checkpoint":"contextos/audit/acme\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— x y\n"}]}`))
	f.Add([]byte(`{"v":2,"logs":[{"origin":"contextos/audit/acme","key":"contextos/audit/acme+00000000+AQ==","checkpoint":"contextos/audit/acme\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— x y\n"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseState(b)
		if err != nil {
			return
		}
		path := filepath.Join(t.TempDir(), "state.json")
		if err := SaveState(path, s); err != nil {
			t.Fatal(err)
		}
		again, err := LoadState(path)
		if err != nil || len(again) != len(s) {
			t.Fatalf("state does not round-trip: %v", err)
		}
	})
}

// TestClientKeepsItsWitnessLineAmongSeveral: C2SP tlog-witness answers
// with one or more cosignature lines and its client ignores the lines of
// keys it does not know. A witness that also cosigns with a second key
// (here a real witness behind a front that adds that key's genuine line
// before its own) is accepted, and only the configured key's line is
// kept; a line under the configured key that does not verify is refused.
func TestClientKeepsItsWitnessLineAmongSeveral(t *testing.T) {
	c, err := audit.NewCosigner("witness.test/w1", key("witness"), func() uint64 { return 1767225600 })
	if err != nil {
		t.Fatal(err)
	}
	second, err := audit.NewCosigner("witness.test/w1-pq", key("second key"), func() uint64 { return 1767225600 })
	if err != nil {
		t.Fatal(err)
	}
	w, err := Open(c, []string{logKey(t)}, filepath.Join(t.TempDir(), "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	real := Handler(w)
	var corrupt bool
	hs := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		rec := httptest.NewRecorder()
		real.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if rec.Code == http.StatusOK {
			req, err := audit.ParseAddCheckpoint(b)
			if err != nil {
				t.Error(err)
			}
			cp, err := audit.ReadCheckpoint(req.Note)
			if err != nil {
				t.Error(err)
			}
			extra, err := second.Cosign(cp.Text())
			if err != nil {
				t.Error(err)
			}
			if corrupt { // one character in the middle of the signature
				body = append([]byte{}, body...)
				if i := len(body) - 20; body[i] == 'A' {
					body[i] = 'B'
				} else {
					body[i] = 'A'
				}
			}
			body = append(extra, body...)
		}
		for k, v := range rec.Header() {
			rw.Header()[k] = v
		}
		rw.WriteHeader(rec.Code)
		_, _ = rw.Write(body)
	}))
	t.Cleanup(hs.Close)
	l := newLog(t, 8, -1)
	client := &Client{URL: hs.URL, Key: c.Verifier()}
	signed := l.checkpoint(t, 5)
	line, err := client.Submit(context.Background(), TreeProver{&l.tree}, signed)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(line), "— witness.test/w1 ") || strings.Count(string(line), "\n") != 1 {
		t.Fatalf("kept %q; want the one line of witness.test/w1", line)
	}
	if _, err := audit.OpenCheckpoint(audit.AddCosignatures(signed, line), note.VerifierList(mustVerifier(t, logKey(t))), []*audit.Cosigner{c.Verifier()}); err != nil {
		t.Fatalf("the kept line does not open: %v", err)
	}
	corrupt = true
	if _, err := client.Submit(context.Background(), TreeProver{&l.tree}, l.checkpoint(t, 8)); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("a bad line under the configured key: %v; want it refused", err)
	}
}

// TestRefusalKinds: the refusals that say the history changed (the log
// shrank, or forked) and the ones that do not, as C2SP tlog-witness, this
// project's witness and litewitness answer them.
func TestRefusalKinds(t *testing.T) {
	for _, tc := range []struct {
		err  RefusedError
		size int64
		want string
	}{
		{RefusedError{Status: http.StatusConflict, Size: 20}, 11, RefusalShrank},
		{RefusedError{Status: http.StatusConflict, Size: 20}, 20, RefusalForked}, // C2SP: same size, another root
		{RefusedError{Status: http.StatusConflict, Size: 5}, 20, RefusalRejected},
		{RefusedError{Status: http.StatusUnprocessableEntity}, 20, RefusalForked},
		{RefusedError{Status: http.StatusForbidden}, 20, RefusalKey},
		{RefusedError{Status: http.StatusNotFound}, 20, RefusalUnknown},
		{RefusedError{Status: http.StatusBadRequest}, 20, RefusalRejected},
	} {
		if got := tc.err.Kind(tc.size); got != tc.want {
			t.Errorf("%d with size %d, checkpoint of %d: %s; want %s", tc.err.Status, tc.err.Size, tc.size, got, tc.want)
		}
	}
}
