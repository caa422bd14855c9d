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
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"sigs.k8s.io/yaml"
)

var (
	testDate     = time.Date(2026, 11, 30, 12, 34, 56, 0, time.UTC)
	testVersion  = "v1.2.3"
	allPlatforms = []Platform{
		{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"},
	}
)

// stubConfig releases the stub program under the three binaries' names, for every platform
// (the hub for linux and darwin), with the real krew template, LICENSE and README.md.
func stubConfig(output string) Config {
	ld := "-s -w -X github.com/youngju-dev/gpu-inventory-operator/pkg/version.version=" + testVersion +
		" -X github.com/youngju-dev/gpu-inventory-operator/pkg/version.commit=0123abcd" +
		" -X github.com/youngju-dev/gpu-inventory-operator/pkg/version.buildDate=" + testDate.Format(time.RFC3339)
	return Config{
		Version: testVersion,
		LDFlags: ld,
		Date:    testDate,
		Go:      "go",
		Commands: []Command{
			{Name: "gpu-inventory-operator", Package: "./testdata/stub"},
			{Name: "gpu-fleet-hub", Package: "./testdata/stub", OSes: []string{"linux", "darwin"}},
			{Name: "kubectl-gpuinv", Package: "./testdata/stub"},
		},
		Platforms:    allPlatforms,
		Files:        []string{"../../LICENSE", "../../README.md"},
		KrewTemplate: "../krew/gpuinv.yaml",
		KrewCommand:  "kubectl-gpuinv",
		ImageCommand: "gpu-inventory-operator",
		ImageExtra:   []string{"gpu-fleet-hub"},
		ImageArches:  []string{"amd64", "arm64"},
		ImageRef:     "example.com/gpu/gpu-inventory-operator:" + testVersion,
		Output:       output,
	}
}

var (
	releaseOnce sync.Once
	releaseCfg  Config
	releaseErr  error
)

// release runs one stub release for all the tests of this file.
func release(t *testing.T) Config {
	t.Helper()
	releaseOnce.Do(func() {
		dir, err := os.MkdirTemp("", "release-test-")
		if err != nil {
			releaseErr = err
			return
		}
		releaseCfg = stubConfig(filepath.Join(dir, "release"))
		releaseCfg.OCILayout = filepath.Join(dir, "oci-layout")
		releaseErr = Run(context.Background(), releaseCfg)
	})
	if releaseErr != nil {
		t.Fatalf("release: %v", releaseErr)
	}
	return releaseCfg
}

func TestMain(m *testing.M) {
	code := m.Run()
	if releaseCfg.Output != "" {
		os.RemoveAll(filepath.Dir(releaseCfg.Output))
	}
	os.Exit(code)
}

func TestReleaseAssets(t *testing.T) {
	c := release(t)
	sumsData, err := os.ReadFile(filepath.Join(c.Output, SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	sums, err := ParseSums(sumsData)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSuffix(string(sumsData), "\n"), "\n") {
		hash, name, ok := strings.Cut(line, "  ")
		if !ok || len(hash) != 64 || strings.ContainsAny(name, " /") {
			t.Errorf("%s line %q is not sha256sum's \"<sha256>  <file>\"", SumsFile, line)
		}
		names = append(names, name)
	}
	want := []string{
		"gpu-fleet-hub_v1.2.3_darwin_amd64.tar.gz",
		"gpu-fleet-hub_v1.2.3_darwin_arm64.tar.gz",
		"gpu-fleet-hub_v1.2.3_linux_amd64.tar.gz",
		"gpu-fleet-hub_v1.2.3_linux_arm64.tar.gz",
		"gpu-inventory-operator_v1.2.3_darwin_amd64.tar.gz",
		"gpu-inventory-operator_v1.2.3_darwin_arm64.tar.gz",
		"gpu-inventory-operator_v1.2.3_image.oci.tar",
		"gpu-inventory-operator_v1.2.3_linux_amd64.tar.gz",
		"gpu-inventory-operator_v1.2.3_linux_arm64.tar.gz",
		"gpu-inventory-operator_v1.2.3_windows_amd64.tar.gz",
		"gpuinv.yaml",
		"kubectl-gpuinv_v1.2.3_darwin_amd64.tar.gz",
		"kubectl-gpuinv_v1.2.3_darwin_arm64.tar.gz",
		"kubectl-gpuinv_v1.2.3_linux_amd64.tar.gz",
		"kubectl-gpuinv_v1.2.3_linux_arm64.tar.gz",
		"kubectl-gpuinv_v1.2.3_windows_amd64.tar.gz",
	}
	if !slices.Equal(names, want) {
		t.Errorf("%s lists\n%q\nwant\n%q", SumsFile, names, want)
	}
	dir, err := os.ReadDir(c.Output)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range dir {
		files = append(files, e.Name())
	}
	if want := append(slices.Clone(want), SumsFile); !slices.Equal(files, slices.Sorted(slices.Values(want))) {
		t.Errorf("%s holds %q, want the assets and %s only", c.Output, files, SumsFile)
	}

	license, _ := os.ReadFile("../../LICENSE")
	readme, _ := os.ReadFile("../../README.md")
	for _, p := range allPlatforms {
		for _, cmd := range []string{"gpu-inventory-operator", "gpu-fleet-hub", "kubectl-gpuinv"} {
			if cmd == "gpu-fleet-hub" && p.OS == "windows" {
				continue // a server: no windows archive (SHA256SUMS above lists none)
			}
			archive := cmd + "_v1.2.3_" + p.OS + "_" + p.Arch + ".tar.gz"
			t.Run(archive, func(t *testing.T) {
				sum, err := SumFile(filepath.Join(c.Output, archive))
				if err != nil || sum != sums[archive] {
					t.Errorf("sha256 %s (%v), %s says %s", sum, err, SumsFile, sums[archive])
				}
				entries, err := ReadArchive(filepath.Join(c.Output, archive))
				if err != nil {
					t.Fatal(err)
				}
				bin := cmd
				if p.OS == "windows" {
					bin += ".exe"
				}
				var got []string
				for _, e := range entries {
					got = append(got, e.Header.Name)
					if e.Header.Uid != 0 || e.Header.Gid != 0 || !e.Header.ModTime.Equal(testDate) {
						t.Errorf("%s: owner %d:%d, mtime %s; want 0:0 and %s", e.Header.Name, e.Header.Uid, e.Header.Gid, e.Header.ModTime, testDate)
					}
					switch e.Header.Name {
					case bin:
						if err := CheckExecutable(e.Data, p); err != nil {
							t.Error(err)
						}
					case "LICENSE":
						if !bytes.Equal(e.Data, license) {
							t.Error("LICENSE is not the repository's")
						}
					case "README.md":
						if !bytes.Equal(e.Data, readme) {
							t.Error("README.md is not the repository's")
						}
					}
				}
				if want := []string{"LICENSE", "README.md", bin}; !slices.Equal(got, want) {
					t.Errorf("holds %q, want %q", got, want)
				}
				if p.OS == runtime.GOOS && p.Arch == runtime.GOARCH {
					// The binary runs and reports what the ldflags stamped.
					exe := filepath.Join(t.TempDir(), bin)
					i := slices.IndexFunc(entries, func(e ArchiveEntry) bool { return e.Header.Name == bin })
					if err := os.WriteFile(exe, entries[i].Data, 0o755); err != nil {
						t.Fatal(err)
					}
					out, err := exec.Command(exe).CombinedOutput()
					want := "stub v1.2.3 (commit 0123abcd, built 2026-11-30T12:34:56Z, " + runtime.Version() + ", " + p.String() + ")\n"
					if err != nil || string(out) != want {
						t.Errorf("running it: %v, %q; want %q", err, out, want)
					}
				}
			})
		}
	}
}

func TestReleaseKrewManifest(t *testing.T) {
	c := release(t)
	data, err := os.ReadFile(filepath.Join(c.Output, "gpuinv.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("${")) {
		t.Errorf("a placeholder is left:\n%s", data)
	}
	sumsData, _ := os.ReadFile(filepath.Join(c.Output, SumsFile))
	sums, err := ParseSums(sumsData)
	if err != nil {
		t.Fatal(err)
	}
	var m krewManifest
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.Spec.Version != "v1.2.3" {
		t.Errorf("spec.version %q, want v1.2.3", m.Spec.Version)
	}
	var platforms []string
	for _, pl := range m.Spec.Platforms {
		p := Platform{pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]}
		platforms = append(platforms, p.String())
		archive := "kubectl-gpuinv_v1.2.3_" + p.OS + "_" + p.Arch + ".tar.gz"
		if want := "https://github.com/youngju-dev/gpu-inventory-operator/releases/download/v1.2.3/" + archive; pl.URI != want {
			t.Errorf("%s: uri %s, want %s", p, pl.URI, want)
		}
		actual, err := SumFile(filepath.Join(c.Output, archive))
		if err != nil {
			t.Error(err)
		}
		if pl.Sha256 != sums[archive] || pl.Sha256 != actual {
			t.Errorf("%s: sha256 %s; %s says %s, the archive's is %s", p, pl.Sha256, SumsFile, sums[archive], actual)
		}
	}
	if want := []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64", "windows/amd64"}; !slices.Equal(slices.Sorted(slices.Values(platforms)), want) {
		t.Errorf("platforms %q, want %q", platforms, want)
	}
}

func TestReleaseImageIndex(t *testing.T) {
	c := release(t)
	archive := filepath.Join(c.Output, "gpu-inventory-operator_v1.2.3_image.oci.tar")
	dir := t.TempDir()
	if err := extractTar(archive, dir); err != nil {
		t.Fatal(err)
	}
	for name, layoutDir := range map[string]string{"the oci-archive": dir, "the OCI layout": c.OCILayout} {
		root, err := layout.ImageIndexFromPath(layoutDir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rm, err := root.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(rm.Manifests) != 1 || rm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1.2.3" ||
			rm.Manifests[0].Annotations["io.containerd.image.name"] != "example.com/gpu/gpu-inventory-operator:v1.2.3" {
			t.Fatalf("%s: index.json %+v, want one index named example.com/gpu/gpu-inventory-operator:v1.2.3", name, rm.Manifests)
		}
		idx, err := root.ImageIndex(rm.Manifests[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		var platforms []string
		for _, desc := range im.Manifests {
			platforms = append(platforms, desc.Platform.String())
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.OS != "linux" || cfg.Architecture != desc.Platform.Architecture {
				t.Errorf("%s: %s's config is for %s/%s", name, desc.Platform, cfg.OS, cfg.Architecture)
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 1 {
				t.Fatalf("%s: %s: %d layers (%v), want 1", name, desc.Platform, len(layers), err)
			}
			rc, err := layers[0].Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			bins := filesInTar(t, rc)
			rc.Close()
			if !slices.Equal(cfg.Config.Entrypoint, []string{"/gpu-inventory-operator"}) {
				t.Errorf("%s: %s: entrypoint %q, want [/gpu-inventory-operator]", name, desc.Platform, cfg.Config.Entrypoint)
			}
			for _, cmd := range []string{"gpu-inventory-operator", "gpu-fleet-hub"} {
				p := Platform{"linux", desc.Platform.Architecture}
				if err := CheckExecutable(bins[cmd], p); err != nil {
					t.Errorf("%s: %s: the layer's %s: %v", name, desc.Platform, cmd, err)
				}
				if archived := binaryInArchive(t, c, cmd, p); !bytes.Equal(bins[cmd], archived) {
					t.Errorf("%s: %s: the layer's %s is not the %s archive's", name, desc.Platform, cmd, p)
				}
			}
		}
		if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
			t.Errorf("%s: index for %q, want %q", name, platforms, want)
		}
	}
}

// The same commit and flags give the same bytes: a second release has the same sums.
func TestReleaseIsReproducible(t *testing.T) {
	c := release(t)
	again := stubConfig(filepath.Join(t.TempDir(), "again"))
	if err := Run(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(filepath.Join(c.Output, SumsFile))
	second, _ := os.ReadFile(filepath.Join(again.Output, SumsFile))
	if !bytes.Equal(first, second) {
		t.Errorf("two releases of the same tree differ:\n%s\n%s", first, second)
	}
}

// CheckExecutable tells every platform's binary from every other's.
func TestCheckExecutable(t *testing.T) {
	c := release(t)
	binaries := map[Platform][]byte{}
	for _, p := range allPlatforms {
		entries, err := ReadArchive(filepath.Join(c.Output, ArchiveName("kubectl-gpuinv", c.Version, p)))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Header.Name == BinaryName("kubectl-gpuinv", p) {
				binaries[p] = e.Data
			}
		}
	}
	for _, built := range allPlatforms {
		for _, want := range allPlatforms {
			err := CheckExecutable(binaries[built], want)
			if (err == nil) != (built == want) {
				t.Errorf("binary for %s checked as %s: %v", built, want, err)
			}
		}
	}
	if err := CheckExecutable([]byte("#!/bin/sh\necho hi\n"), Platform{"linux", "amd64"}); err == nil {
		t.Error("a shell script passes as a linux/amd64 executable")
	}
}

// filesInTar returns the content of the tar's regular files by name.
func filesInTar(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// binaryInArchive returns cmd's binary from its archive for p.
func binaryInArchive(t *testing.T, c Config, cmd string, p Platform) []byte {
	t.Helper()
	entries, err := ReadArchive(filepath.Join(c.Output, ArchiveName(cmd, c.Version, p)))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Header.Name == BinaryName(cmd, p) {
			return e.Data
		}
	}
	t.Fatalf("no %s in %s", BinaryName(cmd, p), ArchiveName(cmd, c.Version, p))
	return nil
}
