package gateway

import (
	"testing"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/projections"
	"github.com/contextos/ledger/wire"
)

// TestEveryVerbHasAScope: every verb the daemon serves names its scope in
// the kernel's table (confirm is checked against its request's), so no
// verb falls to "every scope" by being forgotten.
func TestEveryVerbHasAScope(t *testing.T) {
	verbs := append(append(append([]string{wire.VerbBreaker}, OpVerbs...), IntegrityVerbs...), projections.Verbs...)
	for _, v := range verbs {
		if v == wire.VerbConfirm {
			continue
		}
		if kernel.NeededScope(v, nil) == "" {
			t.Errorf("verb %s has no scope in kernel.verbScopes", v)
		}
	}
}
