package assent_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// module is the module path; imports under it are the module's own.
const module = "github.com/assent-run/assent"

// goImport is one import of one Go file of the module.
type goImport struct {
	dir  string // the importing package's directory, slash-separated ("." is the root)
	file string // the file's path, for messages
	test bool   // the file is a _test.go file
	path string // the imported package, relative to the module ("server/flows")
}

// moduleImports returns every import of a package of this module by a Go
// file of this module, skipping testdata directories.
func moduleImports(t *testing.T) []goImport {
	t.Helper()
	var out []goImport
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, is := range f.Imports {
			ip, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return err
			}
			rel, ok := strings.CutPrefix(ip, module+"/")
			if !ok {
				continue
			}
			out = append(out, goImport{dir: path.Dir(filepath.ToSlash(p)), file: filepath.ToSlash(p), test: strings.HasSuffix(p, "_test.go"), path: rel})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no imports found: the test does not run in the module's root")
	}
	return out
}

// under reports whether the slash-separated path p is dir or inside it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// TestImportsPointDown checks the layering docs/architecture.md
// describes: the domain packages and low-level helpers import nothing of
// the server; the server's parts import nothing of the application built
// on them (package demo) or of the commands; the whole-server test kit
// (internal/assenttest) is used only by tests of what sits on the server;
// and the demo reaches the server only through its exported API.
func TestImportsPointDown(t *testing.T) {
	// top are the packages that sit on the server: they may import it.
	top := []string{"server", "demo", "cmd", "e2e", "internal/assenttest"}
	onTop := func(dir string) bool {
		for _, d := range top {
			if under(dir, d) {
				return true
			}
		}
		return false
	}
	// The client's tests run it against a real server, as e2e does; the
	// client itself imports only the wire and the API's bodies.
	clientTest := func(im goImport) bool { return im.test && under(im.dir, "client") }
	for _, im := range moduleImports(t) {
		switch {
		case !onTop(im.dir) && !clientTest(im) && (under(im.path, "server") || under(im.path, "demo") || under(im.path, "internal/assenttest")):
			t.Errorf("%s imports %s: a package below the server imports nothing of it, of the demo or of the server's test kit", im.file, im.path)
		case under(im.path, "cmd") || under(im.path, "e2e"):
			t.Errorf("%s imports %s: nothing imports the commands or the end-to-end tests", im.file, im.path)
		case under(im.dir, "server") && !im.test && (under(im.path, "demo") || under(im.path, "internal/assenttest")):
			t.Errorf("%s imports %s: the server and its parts carry no demo and no test kit", im.file, im.path)
		case under(im.path, "internal/assenttest") && !im.test:
			t.Errorf("%s imports %s outside a test", im.file, im.path)
		case under(im.dir, "demo") && !im.test && (under(im.path, "server/host") || under(im.path, "server/internal") || under(im.path, "internal")):
			t.Errorf("%s imports %s: the demo uses the server's exported API only, as any application must", im.file, im.path)
		}
	}
}
