package projections

import (
	"testing"

	"github.com/contextos/ledger/kernel"
)

// TestOpsCodesDistinct: the ops refusal codes neither repeat nor reuse a
// kernel code for another meaning.
func TestOpsCodesDistinct(t *testing.T) {
	seen := map[kernel.Code]bool{}
	for _, c := range kernel.Codes {
		seen[c] = true
	}
	for _, c := range []kernel.Code{CodeNotFound, CodeNotCheckpointed, CodeUnavailable} {
		if seen[c] {
			t.Fatalf("code %q is already in use", c)
		}
		seen[c] = true
	}
}
