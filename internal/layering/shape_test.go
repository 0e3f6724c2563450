package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function outside tests may be: past it, a reader can no
// longer hold the function in view, and it is time to name its parts.
const maxFuncLines = 100

// TestFunctionLength walks the module's non-test Go files (test support packages such as
// testkit, statetest and storetest count as tests) and names every function longer than
// maxFuncLines.
func TestFunctionLength(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "testkit" || strings.HasSuffix(name, "test")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s: %s is %d lines (at most %d outside tests): split it into named parts", rel, fd.Name.Name, n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("read only %d Go files from %s: is the walk rooted at the module?", checked, root)
	}
}
