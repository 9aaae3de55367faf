package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps: the client imports the wire contract and nats.go (with their
// own dependencies), never the runtime: no nats-server, and no package of
// this module but wire.
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(dep, "github.com/nats-io/nats-server"),
			strings.HasPrefix(dep, "github.com/contextos/ledger/") && dep != "github.com/contextos/ledger/wire" && dep != "github.com/contextos/ledger/client":
			t.Errorf("the client depends on %s", dep)
		}
	}
}
