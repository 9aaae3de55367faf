package projections_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProjectionsDeps: the runtime's read model and the view and export
// formats it writes do not depend on the offline verifier, which stays a
// standalone reader of exported files.
func TestProjectionsDeps(t *testing.T) {
	for pkg, banned := range map[string][]string{
		".":           {"github.com/contextos/ledger/verifier"},
		"../exposure": {"github.com/contextos/ledger/verifier", "github.com/contextos/ledger/projections"},
		"../audit":    {"github.com/contextos/ledger/verifier", "github.com/contextos/ledger/projections"},
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) == 0 {
			t.Fatalf("go list -deps %s listed nothing", pkg)
		}
		for _, dep := range deps {
			for _, b := range banned {
				if dep == b || strings.HasPrefix(dep, b+"/") {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}
