package wire

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps wire a leaf: it depends on the standard library only, so
// that a client of the contract imports nothing of the runtime.
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Deps "\n"}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(strings.SplitN(dep, "/", 2)[0], ".") {
			t.Errorf("wire depends on %s", dep)
		}
	}
}
