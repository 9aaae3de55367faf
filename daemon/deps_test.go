package daemon_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDoorsDoNotImportTheRoot: the console and the MCP gateway receive what
// they need (their options, a Proposer) from this package and import
// neither it nor the gateway's request path, so the composition root is
// here alone.
func TestDoorsDoNotImportTheRoot(t *testing.T) {
	for _, pkg := range []string{"../console", "../console/tower", "../mcpgw"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			switch dep {
			case "github.com/contextos/ledger/daemon", "github.com/contextos/ledger/gateway":
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
