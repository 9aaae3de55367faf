package kernel

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeps keeps the kernel pure. Its own imports may not reach the
// operating system, the network, a clock or randomness; nothing it depends
// on, directly or not, may be a network or NATS package or another layer of
// this project but wire (the code catalog and the wire contract's types,
// itself standard library only). (The standard library's crypto/sha256 reaches os internally
// for its FIPS self-test, and apd imports math/rand for its own tests'
// helpers, so the transitive rule is stated for what matters: no network, no
// store, no layer above.)
func TestDeps(t *testing.T) {
	direct := goList(t, "{{join .Imports \"\\n\"}}")
	bannedDirect := []string{"os", "net", "io/fs", "math/rand", "math/rand/v2", "crypto/rand", "syscall", "unsafe"}
	for _, imp := range direct {
		for _, b := range bannedDirect {
			if imp == b || strings.HasPrefix(imp, b+"/") && b != "math/rand" {
				t.Errorf("kernel imports %s", imp)
			}
		}
	}
	for _, dep := range goList(t, "{{join .Deps \"\\n\"}}") {
		switch {
		case dep == "net" || strings.HasPrefix(dep, "net/"),
			strings.Contains(dep, "nats-io"),
			strings.HasPrefix(dep, "github.com/contextos/ledger/") && dep != "github.com/contextos/ledger/kernel" && dep != "github.com/contextos/ledger/wire":
			t.Errorf("kernel depends on %s", dep)
		}
	}
}

func goList(t *testing.T, format string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", format, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return strings.Fields(string(out))
}

// TestNoClock fails when a kernel source file calls time.Now, time.Since or
// reads randomness: time and ids are inputs.
func TestNoClock(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" {
				switch sel.Sel.Name {
				case "Now", "Since", "Until", "Sleep", "After", "Tick", "NewTimer", "NewTicker":
					t.Errorf("%s: kernel calls time.%s", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
}
