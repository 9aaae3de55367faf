package kernel

import (
	"testing"

	"github.com/contextos/ledger/wire"
)

// TestInexactAmount: a number no double holds exactly (1e400) at a
// guarantee's amount pointer is an invalid amount, the code of every other
// amount outside 1..2^53-1; elsewhere in the arguments it is a malformed
// request.
func TestInexactAmount(t *testing.T) {
	amount := Pointer{"amount_minor"}
	for _, c := range []struct {
		args     string
		pointers []Pointer
		want     wire.Code
	}{
		{`{"order_id":"o","amount_minor":1e400}`, []Pointer{amount}, wire.CodeAmountInvalid},
		{`{"order_id":"o","amount_minor":9007199254740993}`, []Pointer{amount}, wire.CodeAmountInvalid},
		{`{"order_id":"o","amount_minor":1e400}`, nil, wire.CodeRequestMalformed},
		{`{"order_id":"o","note":1e400,"amount_minor":5}`, []Pointer{amount}, wire.CodeRequestMalformed},
		{`{"order_id":"o","amount_minor":5}`, []Pointer{amount}, ""},
	} {
		_, r := DecodeArguments([]byte(c.args), c.pointers...)
		if (r == nil) != (c.want == "") || r != nil && r.Code != c.want {
			t.Errorf("%s: %v, want %q", c.args, r, c.want)
		}
	}
}
