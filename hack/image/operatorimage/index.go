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
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Index builds one image per Spec and gathers them in an OCI image index, each manifest
// carrying its platform (linux/<arch>) so that a runtime pulls the one for its node.
func Index(specs []Spec) (v1.ImageIndex, error) {
	if len(specs) == 0 {
		return nil, errors.New("an image index needs at least one architecture")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.Arch] {
			return nil, fmt.Errorf("architecture %s given twice", s.Arch)
		}
		seen[s.Arch] = true
		img, err := Build(s)
		if err != nil {
			return nil, fmt.Errorf("image for linux/%s: %w", s.Arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				Platform: &v1.Platform{OS: "linux", Architecture: s.Arch},
			},
		})
	}
	return idx, nil
}

// RefAnnotations name the index in an OCI layout's index.json: the tag in
// org.opencontainers.image.ref.name, as the OCI image layout specifies (skopeo's
// oci-archive:FILE:TAG), and the full reference in io.containerd.image.name, which
// containerd and `docker load` name the loaded image after (as BuildKit writes it).
func RefAnnotations(ref name.Tag) map[string]string {
	full := ref.Name()
	if ref.RegistryStr() == name.DefaultRegistry {
		full = "docker.io/" + ref.RepositoryStr() + ":" + ref.TagStr()
	}
	return map[string]string{
		"org.opencontainers.image.ref.name": ref.TagStr(),
		"io.containerd.image.name":          full,
	}
}

// WriteLayout writes idx as an OCI image layout directory (replacing dir): index.json
// holds one descriptor, the index, named ref. `crane push DIR REF`, `skopeo copy
// oci:DIR ...` and `regctl image import` read it.
func WriteLayout(dir string, idx v1.ImageIndex, ref name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write OCI layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(RefAnnotations(ref))); err != nil {
		return fmt.Errorf("write OCI layout %s: %w", dir, err)
	}
	return nil
}

// ArchiveLayout writes the OCI layout directory dir as an uncompressed tar file (an
// "oci-archive", which `skopeo copy oci-archive:FILE`, `podman load` and `docker load`
// with the containerd image store read): entries sorted, mode 0644 or 0755, owner 0:0
// and mtime fixed, so the same layout gives the same bytes.
func ArchiveLayout(dir, file string, mtime time.Time) (err error) {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	mtime = mtime.UTC().Truncate(time.Second)
	// WalkDir visits entries in lexical order.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
		switch {
		case d.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			return tw.WriteHeader(h)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, info.Size()
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			defer src.Close()
			_, err = io.Copy(tw, src)
			return err
		default:
			return fmt.Errorf("%s: not a regular file or directory", p)
		}
	})
	if err != nil {
		return fmt.Errorf("archive %s as %s: %w", dir, file, err)
	}
	return tw.Close()
}

// WriteOCIArchive writes idx, named ref, as an oci-archive file (see ArchiveLayout).
func WriteOCIArchive(file string, idx v1.ImageIndex, ref name.Tag, mtime time.Time) error {
	dir, err := os.MkdirTemp(filepath.Dir(file), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := WriteLayout(dir, idx, ref); err != nil {
		return err
	}
	return ArchiveLayout(dir, file, mtime)
}
