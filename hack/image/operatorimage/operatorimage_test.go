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

package operatorimage

import (
	"archive/tar"
	"bytes"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func TestRefAnnotations(t *testing.T) {
	for ref, want := range map[string]string{
		"gpu-inventory-operator:v0.1.0":             "docker.io/library/gpu-inventory-operator:v0.1.0",
		"ghcr.io/example/gpu-inventory-operator:v1": "ghcr.io/example/gpu-inventory-operator:v1",
	} {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		got := RefAnnotations(tag)
		if got["io.containerd.image.name"] != want || got["org.opencontainers.image.ref.name"] != tag.TagStr() {
			t.Errorf("%s: %v, want %s and the tag", ref, got, want)
		}
	}
}

func TestIndexNeedsDistinctArchitectures(t *testing.T) {
	if _, err := Index(nil); err == nil {
		t.Error("an index of no image")
	}
	bin := fakeBinary(t, "gpu-inventory-operator")
	if _, err := Index([]Spec{{Binary: bin, Arch: "amd64"}, {Binary: bin, Arch: "amd64"}}); err == nil {
		t.Error("amd64 twice accepted")
	}
}

// Extra binaries sit beside the entrypoint, which stays the first; two binaries of one name
// would overwrite each other and are refused.
func TestBuildExtraBinaries(t *testing.T) {
	operator, hub := fakeBinary(t, "gpu-inventory-operator"), fakeBinary(t, "gpu-fleet-hub")
	img, err := Build(Spec{Binary: operator, Extra: []string{hub}, Arch: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/gpu-inventory-operator"}) {
		t.Errorf("entrypoint %q, want [/gpu-inventory-operator]", cfg.Config.Entrypoint)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var names []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if b, _ := io.ReadAll(tr); !strings.HasPrefix(h.Name, "etc") && string(b) != "binary for "+h.Name {
			t.Errorf("%s holds %q", h.Name, b)
		}
	}
	if want := []string{"etc/", "etc/passwd", "etc/group", "gpu-fleet-hub", "gpu-inventory-operator"}; !slices.Equal(names, want) {
		t.Errorf("layer holds %q, want %q", names, want)
	}

	for _, extra := range [][]string{{fakeBinary(t, "other/gpu-inventory-operator")}, {hub, hub}, {fakeBinary(t, "etc")}} {
		if _, err := Build(Spec{Binary: operator, Extra: extra, Arch: "amd64"}); err == nil {
			t.Errorf("extra binaries %q accepted beside %s", extra, operator)
		}
	}
}

// The oci-archive is a plain tar of the layout, the same bytes for the same binaries.
func TestOCIArchive(t *testing.T) {
	dir := t.TempDir()
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	specs := []Spec{
		{Binary: fakeBinary(t, "amd64/gpu-inventory-operator"), Arch: "amd64", Version: "v1", Created: created},
		{Binary: fakeBinary(t, "arm64/gpu-inventory-operator"), Arch: "arm64", Version: "v1", Created: created},
	}
	ref, _ := name.NewTag("gpu-inventory-operator:v1")
	var archives [][]byte
	for i := range 2 {
		idx, err := Index(specs)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "image"+string(rune('0'+i))+".oci.tar")
		if err := WriteOCIArchive(file, idx, ref, created); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, b)
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("two archives of the same binaries differ")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".oci-layout-*")); len(left) > 0 {
		t.Errorf("temporary layouts left: %v", left)
	}

	tr := tar.NewReader(bytes.NewReader(archives[0]))
	var names []string
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(created) {
			t.Errorf("%s: owner %d:%d, mtime %s", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			files[h.Name] = string(b)
		}
	}
	if !slices.IsSorted(names) || names[0] != "blobs/" || names[1] != "blobs/sha256/" {
		t.Errorf("entries %q, want sorted, directories first", names)
	}
	// index, 2 manifests, 2 configs, 2 layers; index.json, oci-layout.
	if got := slices.Sorted(maps.Keys(files)); len(got) != 9 || !slices.Contains(got, "index.json") || !slices.Contains(got, "oci-layout") {
		t.Errorf("files %q", got)
	}
	index, err := v1.ParseIndexManifest(strings.NewReader(files["index.json"]))
	if err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].Annotations["io.containerd.image.name"] != "docker.io/library/gpu-inventory-operator:v1" {
		t.Errorf("index.json does not name the image alone: %s", files["index.json"])
	}
}

func fakeBinary(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("binary for "+name), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
