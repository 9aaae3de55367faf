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
// this project. (The standard library's crypto/sha256 reaches os internally
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
			strings.HasPrefix(dep, "github.com/contextos/ledger/") && dep != "github.com/contextos/ledger/kernel":
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

// TestCodesUnique checks the catalog: every code is listed once, in
// snake_case, and no two constants share a string.
func TestCodesUnique(t *testing.T) {
	seen := map[Code]bool{}
	for _, c := range Codes {
		if seen[c] {
			t.Errorf("code %s listed twice", c)
		}
		seen[c] = true
		if c == "" || strings.ToLower(string(c)) != string(c) || strings.ContainsAny(string(c), " -.") {
			t.Errorf("code %q is not snake_case", c)
		}
	}
	// Every Code constant declared in the package must be in Codes.
	fset := token.NewFileSet()
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok {
						continue
					}
					if !seen[Code(strings.Trim(lit.Value, `"`))] {
						t.Errorf("code %s is declared but missing from Codes", lit.Value)
					}
				}
			}
		}
	}
}

// TestRetryClasses: every code of the catalog has a retry class, and the
// map names no code outside it.
func TestRetryClasses(t *testing.T) {
	for _, c := range Codes {
		switch RetryOf(c) {
		case RetryNever, RetrySame, RetryLater, RetryOperator:
		default:
			t.Errorf("code %s has no retry class", c)
		}
	}
	if len(retries) != len(Codes) {
		t.Errorf("%d retry classes for %d codes", len(retries), len(Codes))
	}
}
