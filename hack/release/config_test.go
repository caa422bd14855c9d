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

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" for no error
	}{
		{"a tag", func(c *Config) {}, ""},
		{"commits after a tag, dirty", func(c *Config) { c.Version = "v0.1.0-3-g0123abc-dirty" }, ""},
		{"no tag: git describe gives the commit", func(c *Config) { c.Version = "f569ecc-dirty" }, "starts with v"},
		{"no v", func(c *Config) { c.Version = "0.1.0" }, "starts with v"},
		{"two numbers", func(c *Config) { c.Version = "v0.1" }, "not a semantic version"},
		{"no date", func(c *Config) { c.Date = time.Time{} }, "no date"},
		{"image of an architecture not built", func(c *Config) { c.ImageArches = []string{"amd64", "s390x"} }, "linux/s390x"},
		{"krew command not built", func(c *Config) { c.KrewCommand = "kubectl-other" }, `"kubectl-other" is not among`},
		{"image command not built", func(c *Config) { c.ImageExtra = []string{"gpu-other"} }, `"gpu-other" is not among`},
		{"image command not built for linux", func(c *Config) { c.Commands[1].OSes = []string{"darwin"} }, "gpu-fleet-hub for linux/amd64"},
		{"platform twice", func(c *Config) { c.Platforms = append(c.Platforms, Platform{"linux", "amd64"}) }, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := stubConfig(t.TempDir())
			tc.edit(&c)
			err := c.Check()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Check: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParsePlatforms(t *testing.T) {
	got, err := ParsePlatforms("linux/amd64, windows/amd64")
	if err != nil || !slices.Equal(got, []Platform{{"linux", "amd64"}, {"windows", "amd64"}}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"linux", "linux/", "/amd64", "linux/arm/v7", ""} {
		if _, err := ParsePlatforms(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Entries are sorted whatever order they are given in, and the same files give the same bytes.
func TestWriteArchiveIsReproducible(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"b": "bee", "a": "ay", "C": "sea"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files := []ArchiveFile{{"b", filepath.Join(dir, "b"), 0o755}, {"a", filepath.Join(dir, "a"), 0o644}, {"C", filepath.Join(dir, "C"), 0o644}}
	first, second := filepath.Join(dir, "1.tar.gz"), filepath.Join(dir, "2.tar.gz")
	if err := WriteArchive(first, files, testDate); err != nil {
		t.Fatal(err)
	}
	slices.Reverse(files)
	// Another time in the same second: mtimes are whole seconds.
	if err := WriteArchive(second, files, testDate.Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(first)
	b2, _ := os.ReadFile(second)
	if !bytes.Equal(b1, b2) {
		t.Error("the same files give different archives")
	}
	entries, err := ReadArchive(first)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Header.Name)
		if e.Header.Name == "b" && (e.Header.Mode != 0o755 || string(e.Data) != "bee") {
			t.Errorf("b: mode %o, %q", e.Header.Mode, e.Data)
		}
	}
	if want := []string{"C", "a", "b"}; !slices.Equal(names, want) {
		t.Errorf("entries %q, want %q", names, want)
	}
	if err := WriteArchive(first, append(files, files[0]), testDate); err == nil {
		t.Error("a name twice is accepted")
	}
}

func TestSums(t *testing.T) {
	sums := map[string]string{"b.tar.gz": strings.Repeat("0f", 32), "a.yaml": strings.Repeat("e1", 32)}
	data := FormatSums(sums)
	if want := strings.Repeat("e1", 32) + "  a.yaml\n" + strings.Repeat("0f", 32) + "  b.tar.gz\n"; string(data) != want {
		t.Errorf("FormatSums:\n%s\nwant\n%s", data, want)
	}
	back, err := ParseSums(data)
	if err != nil || len(back) != 2 || back["a.yaml"] != sums["a.yaml"] || back["b.tar.gz"] != sums["b.tar.gz"] {
		t.Errorf("ParseSums(FormatSums(x)) = %v, %v", back, err)
	}
	for _, bad := range []string{"abc  a.yaml\n", strings.Repeat("0f", 32) + " a.yaml\n", strings.Repeat("0f", 32) + "  dir/a.yaml\n"} {
		if _, err := ParseSums([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
