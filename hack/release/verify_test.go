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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/youngju-dev/gpu-inventory-operator/hack/image/operatorimage"
)

// Verify, which make release runs on what it wrote, fails on each way a release can be wrong.
func TestVerifyFindsWhatIsWrong(t *testing.T) {
	good := release(t)
	if err := Verify(good); err != nil {
		t.Fatalf("the release as written: %v", err)
	}
	arm := ArchiveName("kubectl-gpuinv", testVersion, Platform{"linux", "arm64"})
	amd := ArchiveName("kubectl-gpuinv", testVersion, Platform{"linux", "amd64"})
	image := ImageArchiveName("gpu-inventory-operator", testVersion)
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, c Config)
		want   string
	}{{
		name: "an archive holding another architecture's binary",
		break_: func(t *testing.T, c Config) {
			copyFile(t, filepath.Join(c.Output, amd), filepath.Join(c.Output, arm))
		},
		want: "ELF for EM_X86_64, want linux/arm64",
	}, {
		name: "an archive with one file more",
		break_: func(t *testing.T, c Config) {
			rewriteArchive(t, c, arm, func(files []ArchiveFile) []ArchiveFile {
				return append(files, ArchiveFile{Name: "NOTICE", Source: "../../LICENSE", Mode: 0o644})
			}, testDate)
		},
		want: `holds ["LICENSE" "NOTICE" "README.md" "kubectl-gpuinv"]`,
	}, {
		name: "an archive built at another time",
		break_: func(t *testing.T, c Config) {
			rewriteArchive(t, c, arm, func(files []ArchiveFile) []ArchiveFile { return files }, testDate.Add(time.Hour))
		},
		want: "mtime 2026-11-30T13:34:56Z, want the commit's time 2026-11-30T12:34:56Z",
	}, {
		name: "a sums file missing an asset",
		break_: func(t *testing.T, c Config) {
			editFile(t, filepath.Join(c.Output, SumsFile), func(s string) string {
				var keep []string
				for _, line := range strings.SplitAfter(s, "\n") {
					if !strings.HasSuffix(line, "  "+image+"\n") {
						keep = append(keep, line)
					}
				}
				return strings.Join(keep, "")
			})
		},
		want: SumsFile + " lists",
	}, {
		name: "a krew manifest with another archive's sum",
		break_: func(t *testing.T, c Config) {
			sums, _ := SumFiles(c.Output, []string{arm, amd})
			editFile(t, filepath.Join(c.Output, "gpuinv.yaml"), func(s string) string {
				return strings.Replace(s, sums[arm], sums[amd], 1)
			})
		},
		want: "linux/arm64: sha256 \"",
	}, {
		name: "a krew manifest with a placeholder left",
		break_: func(t *testing.T, c Config) {
			editFile(t, filepath.Join(c.Output, "gpuinv.yaml"), func(s string) string {
				return strings.Replace(s, "version: "+testVersion, "version: ${VERSION}", 1)
			})
		},
		want: "a ${...} placeholder is left",
	}, {
		name: "an image index without arm64",
		break_: func(t *testing.T, c Config) {
			amd64 := Platform{"linux", "amd64"}
			spec := operatorimage.Spec{
				Binary:  archivedBinary(t, c, "gpu-inventory-operator", amd64),
				Extra:   []string{archivedBinary(t, c, "gpu-fleet-hub", amd64)},
				Arch:    "amd64",
				Version: testVersion,
				Created: testDate,
			}
			writeImageArchive(t, c, []operatorimage.Spec{spec})
		},
		want: `index for linux/["amd64"], want ["amd64" "arm64"]`,
	}, {
		name: "an image without the fleet hub",
		break_: func(t *testing.T, c Config) {
			var specs []operatorimage.Spec
			for _, arch := range c.ImageArches {
				bin := archivedBinary(t, c, "gpu-inventory-operator", Platform{"linux", arch})
				specs = append(specs, operatorimage.Spec{Binary: bin, Arch: arch, Version: testVersion, Created: testDate})
			}
			writeImageArchive(t, c, specs)
		},
		want: `linux/arm64: the layer holds ["gpu-inventory-operator"] beside /etc, want ["gpu-fleet-hub" "gpu-inventory-operator"]`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			c.Output = filepath.Join(t.TempDir(), "release")
			c.OCILayout = ""
			if err := os.Mkdir(c.Output, 0o755); err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(good.Output)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				copyFile(t, filepath.Join(good.Output, e.Name()), filepath.Join(c.Output, e.Name()))
			}
			tc.break_(t, c)
			err = Verify(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Verify: %v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func editFile(t *testing.T, file string, edit func(string) string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	edited := edit(string(b))
	if edited == string(b) {
		t.Fatalf("the edit left %s as it was", file)
	}
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rewriteArchive writes archive again from its own entries, changed by edit, at mtime.
func rewriteArchive(t *testing.T, c Config, archive string, edit func([]ArchiveFile) []ArchiveFile, mtime time.Time) {
	t.Helper()
	entries, err := ReadArchive(filepath.Join(c.Output, archive))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var files []ArchiveFile
	for _, e := range entries {
		src := filepath.Join(dir, e.Header.Name)
		if err := os.WriteFile(src, e.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, ArchiveFile{Name: e.Header.Name, Source: src, Mode: e.Header.Mode})
	}
	if err := WriteArchive(filepath.Join(c.Output, archive), edit(files), mtime); err != nil {
		t.Fatal(err)
	}
}

// archivedBinary writes cmd's binary from its archive for p to a file and returns its path.
func archivedBinary(t *testing.T, c Config, cmd string, p Platform) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), BinaryName(cmd, p))
	if err := os.WriteFile(bin, binaryInArchive(t, c, cmd, p), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// writeImageArchive replaces the release's image oci-archive with the index of specs.
func writeImageArchive(t *testing.T, c Config, specs []operatorimage.Spec) {
	t.Helper()
	idx, err := operatorimage.Index(specs)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(c.ImageRef)
	if err != nil {
		t.Fatal(err)
	}
	if err := operatorimage.WriteOCIArchive(filepath.Join(c.Output, ImageArchiveName(c.ImageCommand, testVersion)), idx, ref, testDate); err != nil {
		t.Fatal(err)
	}
}
