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
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"

	"github.com/youngju-dev/gpu-inventory-operator/hack/image/operatorimage"
)

// The tarball `make image` writes, loaded back: entrypoint, non-root user matching the
// Deployment, nothing but the static binaries (the operator and the fleet hub) and the user
// database, and binaries that run with no shell or libc around them.
func TestImageTarball(t *testing.T) {
	dir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", dir+string(filepath.Separator), "../../cmd/gpu-inventory-operator", "../../cmd/gpu-fleet-hub")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	output := filepath.Join(dir, "image.tar")
	spec := operatorimage.Spec{
		Binary:  filepath.Join(dir, "gpu-inventory-operator"),
		Extra:   []string{filepath.Join(dir, "gpu-fleet-hub")},
		Arch:    runtime.GOARCH,
		Version: "test",
		Created: time.Unix(0, 0).UTC(),
	}
	if err := run([]operatorimage.Spec{spec}, "gpu-inventory-operator:test", outputs{tarball: output}); err != nil {
		t.Fatal(err)
	}

	img, err := tarball.ImageFromPath(output, nil)
	if err != nil {
		t.Fatalf("load %s: %v", output, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Config.Entrypoint; !slices.Equal(got, []string{"/gpu-inventory-operator"}) {
		t.Errorf("entrypoint %q, want exec form [/gpu-inventory-operator] (no shell)", got)
	}
	if len(cfg.Config.Cmd) != 0 {
		t.Errorf("cmd %q, want none", cfg.Config.Cmd)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root)", cfg.Config.User)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	deployment, err := os.ReadFile("../../manifests/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					SecurityContext struct {
						RunAsUser int `json:"runAsUser"`
					} `json:"securityContext"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(bytes.SplitN(deployment, []byte("\n---"), 2)[0], &d); err != nil {
		t.Fatal(err)
	}
	if uid := d.Spec.Template.Spec.SecurityContext.RunAsUser; uid != operatorimage.NonRootUID {
		t.Errorf("manifests/deployment.yaml runs as %d, the image as %d", uid, operatorimage.NonRootUID)
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var files []string
	inImage := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, h.Name)
		if !strings.HasPrefix(h.Name, "etc/") {
			if h.Mode&0o111 == 0 {
				t.Errorf("%s's mode is %o, not executable", h.Name, h.Mode)
			}
			if inImage[h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := []string{"etc/", "etc/passwd", "etc/group", "gpu-fleet-hub", "gpu-inventory-operator"}; !slices.Equal(files, want) {
		t.Errorf("layer holds %q, want %q", files, want)
	}

	// The hub's Deployment runs the operator's image with the hub's binary as its command.
	hub, err := os.ReadFile("../../manifests/hub/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Command []string `json:"command"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(bytes.SplitN(hub, []byte("\n---"), 2)[0], &h); err != nil {
		t.Fatal(err)
	}
	if cs := h.Spec.Template.Spec.Containers; len(cs) == 0 || len(cs[0].Command) == 0 || inImage[strings.TrimPrefix(cs[0].Command[0], "/")] == nil {
		t.Errorf("manifests/hub/deployment.yaml runs %+v, which is not a binary in the image", cs)
	}

	// Each binary, with what its --help says.
	for bin, help := range map[string]string{"gpu-inventory-operator": "-leader-elect", "gpu-fleet-hub": "--clusterprofile-provider-file"} {
		checkStaticBinary(t, filepath.Join(dir, "extracted-"+bin), inImage[bin], help)
	}

	// Reproducible: the same binaries give the same image, and the tarball holds it.
	first, err := operatorimage.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	second, err := operatorimage.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := first.Digest()
	d2, _ := second.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same binaries differ: %s, %s", d1, d2)
	}
	c1, _ := first.ConfigName()
	loaded, _ := img.ConfigName()
	if c1 != loaded {
		t.Errorf("the tarball's config %s is not the built image's %s", loaded, c1)
	}
}

// checkStaticBinary writes data to file and checks that it is a static ELF executable that
// prints help (on --help) when run as an entrypoint is: directly, with no environment.
func checkStaticBinary(t *testing.T, file string, data []byte, help string) {
	t.Helper()
	name := filepath.Base(file)
	if err := os.WriteFile(file, data, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := elf.Open(file)
	if err != nil {
		t.Errorf("the image's %s is not an ELF file: %v", name, err)
		return
	}
	defer exe.Close()
	for _, p := range exe.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the image's %s needs a dynamic loader; the image has none", name)
		}
	}
	if libs, _ := exe.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the image's %s links %v; the image has no libc", name, libs)
	}
	if runtime.GOOS == "linux" {
		cmd := exec.Command(file, "--help")
		cmd.Env = []string{}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), help) {
			t.Errorf("the image's %s --help: %v\n%s", name, err, out)
		}
	}
}
