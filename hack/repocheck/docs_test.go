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
	"bufio"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// devDocPath is the page whose package map and fuzz list these tests keep complete.
const devDocPath = "docs/development.md"

// devDocPackageRoots are the directories whose Go packages the map lists.
var devDocPackageRoots = []string{"cmd", "pkg", "hack", "manifests"}

// A table row whose first cell is a backquoted path or name: | `x` | ...
var devDocRow = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|(?:\\s*`([^`]+)`\\s*\\|)?")

var devDocFuzzFunc = regexp.MustCompile(`^func (Fuzz\w*)\(`)

// TestDevelopmentDocNamesEveryPackage fails for a directory with Go files that the package map
// (docs/development.md, "## Layout") lacks, and for a row naming a directory without any.
func TestDevelopmentDocNamesEveryPackage(t *testing.T) {
	root := devDocRepoRoot(t)
	dirs := devDocGoDirs(t, root, devDocPackageRoots, func(path string) bool { return strings.HasSuffix(path, ".go") })
	var rows []string
	for _, cells := range devDocTable(t, root, "## Layout") {
		if slices.ContainsFunc(devDocPackageRoots, func(r string) bool { return cells[0] == r || strings.HasPrefix(cells[0], r+"/") }) {
			rows = append(rows, cells[0])
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		if !slices.ContainsFunc(rows, func(row string) bool { return devDocCovers(row, dir) }) {
			t.Errorf("%s's package map (## Layout) lacks %s: add the row | `%s` | <what its package doc says> |", devDocPath, dir, dir)
		}
	}
	for _, row := range rows {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(dirs)), func(dir string) bool { return devDocCovers(row, dir) }) {
			t.Errorf("%s's package map (## Layout) names %s, which holds no Go files: remove its row", devDocPath, row)
		}
	}
}

// TestDevelopmentDocNamesEveryFuzzTarget fails for a func Fuzz... in a test file that the fuzz
// list (docs/development.md, "### Fuzz targets") lacks, and for a row naming one that is gone.
func TestDevelopmentDocNamesEveryFuzzTarget(t *testing.T) {
	root := devDocRepoRoot(t)
	want := map[string]bool{} // "dir FuzzName"
	for dir, files := range devDocGoDirs(t, root, []string{"."}, func(path string) bool { return strings.HasSuffix(path, "_test.go") }) {
		for _, file := range files {
			for _, name := range devDocFuzzTargets(t, filepath.Join(root, file)) {
				want[dir+" "+name] = true
			}
		}
	}
	listed := map[string]bool{}
	for _, cells := range devDocTable(t, root, "### Fuzz targets") {
		if cells[1] == "" {
			t.Errorf("%s's fuzz list: the row of %s names no package in its second cell", devDocPath, cells[0])
			continue
		}
		listed[cells[1]+" "+cells[0]] = true
	}
	for _, key := range slices.Sorted(maps.Keys(want)) {
		if !listed[key] {
			dir, name, _ := strings.Cut(key, " ")
			t.Errorf("%s's fuzz list (### Fuzz targets) lacks %s of %s: add the row | `%s` | `%s` | <what it feeds and checks> |", devDocPath, name, dir, name, dir)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(listed)) {
		if !want[key] {
			dir, name, _ := strings.Cut(key, " ")
			t.Errorf("%s's fuzz list (### Fuzz targets) names %s of %s, which no test file there declares: remove or correct its row", devDocPath, name, dir)
		}
	}
}

// devDocRepoRoot is the repository's top directory (this package is hack/repocheck).
func devDocRepoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, devDocPath)); err != nil {
		t.Fatalf("the repository's root: %v", err)
	}
	return root
}

// devDocGoDirs walks roots (relative to root) for the files keep accepts and returns them by
// directory, slash-separated and relative to root. It skips what the go command ignores:
// testdata and directories whose name starts with "." or "_".
func devDocGoDirs(t *testing.T, root string, roots []string, keep func(path string) bool) map[string][]string {
	t.Helper()
	dirs := map[string][]string{}
	for _, top := range roots {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() && path != filepath.Join(root, top) && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !keep(name) {
				return nil
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			dir := filepath.ToSlash(filepath.Dir(rel))
			dirs[dir] = append(dirs[dir], rel)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dirs
}

// devDocTable returns the first two backquoted cells of each table row in the section that
// heading opens, up to the next heading of any level; it fails when there is no such row.
func devDocTable(t *testing.T, root, heading string) [][2]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, devDocPath))
	if err != nil {
		t.Fatal(err)
	}
	var rows [][2]string
	in := false
	for line := range strings.SplitSeq(string(data), "\n") {
		switch {
		case line == heading:
			in = true
		case in && strings.HasPrefix(line, "#"):
			in = false
		case in:
			if m := devDocRow.FindStringSubmatch(line); m != nil {
				rows = append(rows, [2]string{m[1], m[2]})
			}
		}
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no table rows under the heading %q", devDocPath, heading)
	}
	return rows
}

// devDocFuzzTargets lists the fuzz targets file declares.
func devDocFuzzTargets(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if m := devDocFuzzFunc.FindStringSubmatch(sc.Text()); m != nil {
			names = append(names, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return names
}

// devDocCovers reports whether a map row covers dir: the same directory, or a tree ("x/...").
func devDocCovers(row, dir string) bool {
	if tree, ok := strings.CutSuffix(row, "/..."); ok {
		return dir == tree || strings.HasPrefix(dir, tree+"/")
	}
	return row == dir
}
