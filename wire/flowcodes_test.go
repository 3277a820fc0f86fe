package wire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFlowCodesAreInTheTable: every error code the Flow kernel declares
// (a constant named Code… in package flow) has a row in the table, so its
// HTTP status and its line in docs/http.md come from the one place. The
// kernel's NOT_FOUND is the exception: the server answers it as not_found.
func TestFlowCodesAreInTheTable(t *testing.T) {
	files, err := filepath.Glob("../flow/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files of package flow found from %s: %v", ".", err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "Code") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					code, _ := strconv.Unquote(lit.Value)
					found++
					if code == "NOT_FOUND" {
						continue
					}
					if _, ok := StatusOf(Code(code)); !ok {
						t.Errorf("flow.%s = %q has no row in the table of codes (codes.go)", id.Name, code)
					}
				}
			}
		}
	}
	if found < 10 {
		t.Fatalf("found %d Code constants in package flow; the test no longer reads it", found)
	}
}
