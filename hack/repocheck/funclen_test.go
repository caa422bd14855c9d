/*
Copyright The gpu-inventory-operator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a hand-written function may be. A function's
// length is its closing brace's line less its func keyword's line.
const maxFuncLines = 80

// repoRoot is the repository's root as seen from this package's directory.
const repoRoot = "../.."

// checkedDirs are the trees whose hand-written code the rule covers.
var checkedDirs = []string{"cmd", "pkg", "hack"}

func TestNoLongFunctions(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	for _, dir := range checkedDirs {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if skippedDir(path) {
					return filepath.SkipDir
				}
				return nil
			}
			if !handWrittenName(path) {
				return nil
			}
			file, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			if ast.IsGenerated(file) {
				return nil
			}
			checked++
			for _, f := range longFunctions(fset, file) {
				if rel, err := filepath.Rel(repoRoot, f.pos.Filename); err == nil {
					f.pos.Filename = filepath.ToSlash(rel)
				}
				t.Errorf("%s: %s is %d lines long; the limit is %d", f.pos, f.name, f.lines, maxFuncLines)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", dir, err)
		}
	}
	if checked == 0 {
		t.Fatalf("no Go file found under %v of %s", checkedDirs, repoRoot)
	}
}

// skippedDir reports whether a directory holds only generated code.
func skippedDir(path string) bool {
	rel, err := filepath.Rel(repoRoot, path)
	return err == nil && filepath.ToSlash(rel) == "pkg/generated"
}

// handWrittenName reports whether a file's name says it is hand-written,
// non-test Go code.
func handWrittenName(path string) bool {
	name := filepath.Base(path)
	return strings.HasSuffix(name, ".go") &&
		!strings.HasSuffix(name, "_test.go") &&
		!strings.HasPrefix(name, "zz_generated")
}

type longFunction struct {
	pos   token.Position
	name  string
	lines int
}

// longFunctions lists the functions and methods of a file longer than
// maxFuncLines, function literals counted as part of their enclosing function.
func longFunctions(fset *token.FileSet, file *ast.File) []longFunction {
	var long []longFunction
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start := fset.Position(fn.Pos())
		lines := fset.Position(fn.End()).Line - start.Line
		if lines > maxFuncLines {
			long = append(long, longFunction{pos: start, name: funcName(fn), lines: lines})
		}
	}
	return long
}

// funcName names a function as a reader looks it up: Recv.Method or Func.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	for {
		switch t := typ.(type) {
		case *ast.StarExpr:
			typ = t.X
			continue
		case *ast.IndexExpr:
			typ = t.X
			continue
		case *ast.IndexListExpr:
			typ = t.X
			continue
		case *ast.Ident:
			return t.Name + "." + fn.Name.Name
		}
		return fn.Name.Name
	}
}
