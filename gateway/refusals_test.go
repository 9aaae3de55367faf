package gateway

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoRefusalOutsideKernel keeps every refusal's decision in the kernel:
// no gateway source builds a kernel.Refusal itself; it measures, calls a
// kernel step or constructor, and maps what the step returns.
func TestNoRefusalOutsideKernel(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, pos := range refusalLiterals(fset, f) {
			t.Errorf("%s: a kernel.Refusal built in the gateway; decide it in a kernel step", pos)
		}
	}
	if checked == 0 {
		t.Fatal("no gateway source found")
	}
}

// TestRefusalLiterals shows the check finds a literal however the kernel
// package is named, and nothing else.
func TestRefusalLiterals(t *testing.T) {
	for src, want := range map[string]int{
		`package p; import "github.com/contextos/ledger/kernel"; var r = &kernel.Refusal{Code: "x"}`:     1,
		`package p; import k "github.com/contextos/ledger/kernel"; var r = []k.Refusal{{}, k.Refusal{}}`: 2,
		`package p; import "github.com/contextos/ledger/kernel"; var r = kernel.RefuseMalformed(nil)`:    0,
		`package p; type Refusal struct{}; var r = Refusal{}`:                                            0,
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(refusalLiterals(fset, f)); got != want {
			t.Errorf("%s: %d literals, want %d", src, got, want)
		}
	}
}

// refusalLiterals are the positions of f's composite literals of
// kernel.Refusal, including the elements of a []kernel.Refusal literal
// that omit their type.
func refusalLiterals(fset *token.FileSet, f *ast.File) []token.Position {
	kernelName := ""
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == "github.com/contextos/ledger/kernel" {
			kernelName = "kernel"
			if imp.Name != nil {
				kernelName = imp.Name.Name
			}
		}
	}
	if kernelName == "" {
		return nil
	}
	isRefusal := func(e ast.Expr) bool {
		if s, ok := e.(*ast.StarExpr); ok {
			e = s.X
		}
		sel, ok := e.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Refusal" {
			return false
		}
		x, ok := sel.X.(*ast.Ident)
		return ok && x.Name == kernelName
	}
	var out []token.Position
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		if isRefusal(lit.Type) {
			out = append(out, fset.Position(lit.Pos()))
		}
		var elem ast.Expr
		switch t := lit.Type.(type) {
		case *ast.ArrayType:
			elem = t.Elt
		case *ast.MapType:
			elem = t.Value
		}
		if elem != nil && isRefusal(elem) {
			for _, e := range lit.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					e = kv.Value
				}
				if c, ok := e.(*ast.CompositeLit); ok && c.Type == nil {
					out = append(out, fset.Position(c.Pos()))
				}
			}
		}
		return true
	})
	return out
}
