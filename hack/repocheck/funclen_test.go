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
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the longest a hand-written function may be. A function's
// length is its closing brace's line less its func keyword's line.
const maxFuncLines = 80

// funcLenRoot is the repository's root as seen from this package's directory.
const funcLenRoot = "../.."

// funcLenTrees are the trees whose hand-written code the rule covers.
var funcLenTrees = []string{"cmd", "pkg", "hack"}

func TestNoLongFunctions(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	for _, dir := range funcLenTrees {
		err := filepath.WalkDir(filepath.Join(funcLenRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if generatedTree(path) {
					return filepath.SkipDir
				}
				return nil
			}
			if !handWrittenGoFile(path) {
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
			for _, f := range longFuncs(fset, file) {
				if rel, err := filepath.Rel(funcLenRoot, f.pos.Filename); err == nil {
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
		t.Fatalf("no Go file found under %v of %s", funcLenTrees, funcLenRoot)
	}
}

// A function may span maxFuncLines lines after its func line, no more; a method is named
// with its receiver's type, generic or not.
func TestLongFuncsCountsFromFuncToClosingBrace(t *testing.T) {
	body := func(name string, lines int) string {
		return name + " {\n" + strings.Repeat("\t_ = 0\n", lines-1) + "}\n"
	}
	src := "package p\n\ntype T[K any] struct{}\n\n" +
		body("func fits()", maxFuncLines) +
		body("func tooLong()", maxFuncLines+1) +
		body("func (t *T[K]) method()", maxFuncLines+1) +
		"func declared()\n"
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range longFuncs(fset, file) {
		got = append(got, fmt.Sprintf("%s %d", f.name, f.lines))
	}
	want := []string{fmt.Sprintf("tooLong %d", maxFuncLines+1), fmt.Sprintf("T.method %d", maxFuncLines+1)}
	if !slices.Equal(got, want) {
		t.Errorf("longFuncs = %q, want %q", got, want)
	}
}

// generatedTree reports whether a directory holds only generated code.
func generatedTree(path string) bool {
	rel, err := filepath.Rel(funcLenRoot, path)
	return err == nil && filepath.ToSlash(rel) == "pkg/generated"
}

// handWrittenGoFile reports whether a file's name says it is hand-written,
// non-test Go code.
func handWrittenGoFile(path string) bool {
	name := filepath.Base(path)
	return strings.HasSuffix(name, ".go") &&
		!strings.HasSuffix(name, "_test.go") &&
		!strings.HasPrefix(name, "zz_generated")
}

type longFunc struct {
	pos   token.Position
	name  string
	lines int
}

// longFuncs lists the functions and methods of a file longer than
// maxFuncLines, function literals counted as part of their enclosing function.
func longFuncs(fset *token.FileSet, file *ast.File) []longFunc {
	var long []longFunc
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start := fset.Position(fn.Pos())
		lines := fset.Position(fn.End()).Line - start.Line
		if lines > maxFuncLines {
			long = append(long, longFunc{pos: start, name: funcDeclName(fn), lines: lines})
		}
	}
	return long
}

// funcDeclName names a function as a reader looks it up: Recv.Method or Func.
func funcDeclName(fn *ast.FuncDecl) string {
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
