package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientDeps: an agent that imports the Go client gets the wire
// contract and nats.go, never the runtime's request path or the NATS
// server.
func TestClientDeps(t *testing.T) {
	for pkg, banned := range map[string][]string{
		".": {"github.com/nats-io/nats-server", "github.com/contextos/ledger/gateway"},
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range banned {
				if dep == b || strings.HasPrefix(dep, b+"/") {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}
