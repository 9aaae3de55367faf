package projections

import (
	"testing"

	"github.com/contextos/ledger/kernel"
)

// TestOpsCodesInCatalog: the ops refusal codes are the kernel catalog's,
// where kernel.TestCodesUnique keeps every code distinct.
func TestOpsCodesInCatalog(t *testing.T) {
	seen := map[kernel.Code]bool{}
	for _, c := range kernel.Codes {
		seen[c] = true
	}
	for _, c := range []kernel.Code{CodeNotFound, CodeNotCheckpointed, CodeUnavailable} {
		if !seen[c] {
			t.Errorf("code %q is not in the kernel's catalog", c)
		}
	}
}
