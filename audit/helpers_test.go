package audit

import (
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// newVerifierList returns the note verifiers of vkeys.
func newVerifierList(tb testing.TB, vkeys []string) note.Verifiers {
	tb.Helper()
	var vs []note.Verifier
	for _, k := range vkeys {
		v, err := note.NewVerifier(k)
		if err != nil {
			tb.Fatal(err)
		}
		vs = append(vs, v)
	}
	return note.VerifierList(vs...)
}
