package verifier

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDepsOffline runs go list -deps on this package and fails on any
// nats-io package or the net package: the verifier works offline. Its
// direct imports are checked first, so that a regression in this package is
// caught.
func TestDepsOffline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	list := func(args ...string) []string {
		out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
		if err != nil {
			t.Fatalf("go list %v: %v", args, err)
		}
		return strings.Fields(string(out))
	}
	forbidden := func(p string) bool {
		return p == "net" || strings.HasPrefix(p, "github.com/nats-io/")
	}
	for _, p := range list("-f", `{{join .Imports " "}}`, ".") {
		if forbidden(p) {
			t.Errorf("verifier imports %s directly", p)
		}
	}
	var bad []string
	for _, p := range list("-deps", ".") {
		if forbidden(p) {
			bad = append(bad, p)
		}
	}
	if len(bad) == 0 {
		return
	}
	// Find which of the verifier's own imports bring them in.
	var via []string
	for _, imp := range list("-f", `{{join .Imports " "}}`, ".") {
		for _, d := range list("-deps", imp) {
			if forbidden(d) {
				via = append(via, imp)
				break
			}
		}
	}
	t.Errorf("verifier depends on %v through %v", bad, via)
}
