package wire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

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
