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

// Package operatorimage builds the operator's container image without a container daemon:
// one layer holding the static binaries (and an /etc/passwd naming the non-root user) on an
// empty base. Build makes the image of one architecture, Index the multi-architecture
// index of several; WriteLayout and WriteOCIArchive write an index to disk. hack/image and
// hack/release use it.
package operatorimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRootUID is the image's user: distroless's "nonroot", and the Deployment's runAsUser.
const NonRootUID = 65532

// Spec describes the image of one architecture.
type Spec struct {
	Binary  string   // path of a static linux binary: the entrypoint, at /<base name>
	Extra   []string // paths of more static linux binaries, each at /<base name> beside it
	Arch    string   // GOARCH of the binaries
	Version string   // org.opencontainers.image.version
	Created time.Time
}

// Build assembles the image.
func Build(s Spec) (v1.Image, error) {
	paths := append([]string{s.Binary}, s.Extra...)
	names := make([]string, len(paths))
	bins := map[string][]byte{}
	for i, p := range paths {
		names[i] = filepath.Base(p)
		if names[i] == "etc" || names[i] == "." || names[i] == "/" {
			return nil, fmt.Errorf("binary %s: /%s is not a binary's place in the image", p, names[i])
		}
		if _, dup := bins[names[i]]; dup {
			return nil, fmt.Errorf("two binaries named %s: each is at /<its name> in the image", names[i])
		}
		bin, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		bins[names[i]] = bin
	}
	entrypoint := "/" + names[0]
	layerTar, err := layerTar(bins)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: s.Created}, CreatedBy: createdBy(names),
	}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", s.Arch
	cfg.Created = v1.Time{Time: s.Created}
	cfg.Config = v1.Config{
		Entrypoint: []string{entrypoint},
		User:       fmt.Sprintf("%d:%d", NonRootUID, NonRootUID),
		WorkingDir: "/",
		Env:        []string{"PATH=/"},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "gpu-inventory-operator",
			"org.opencontainers.image.source":  "https://github.com/youngju-dev/gpu-inventory-operator",
			"org.opencontainers.image.version": s.Version,
		},
	}
	return mutate.ConfigFile(img, cfg)
}

// createdBy is the layer's history entry, as a Dockerfile's COPY would read.
func createdBy(names []string) string {
	if len(names) == 1 {
		return "hack/image: COPY " + names[0] + " /" + names[0]
	}
	return "hack/image: COPY " + strings.Join(names, " ") + " /"
}

// layerTar is the image's only layer: the binaries (by name, in name order), and /etc/passwd
// and /etc/group so that tools resolving the user by name find "nonroot". No shell, no libc:
// the binaries are static.
func layerTar(bins map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	type file struct {
		name string
		mode int64
		data []byte
	}
	files := []file{
		{"etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootUID)},
		{"etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", NonRootUID)},
	}
	for _, n := range slices.Sorted(maps.Keys(bins)) {
		files = append(files, file{n, 0o755, bins[n]})
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "etc/", Mode: 0o755, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
