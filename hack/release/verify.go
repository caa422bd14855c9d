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
	"debug/macho"
	"debug/pe"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"

	"github.com/youngju-dev/gpu-inventory-operator/hack/image/operatorimage"
)

// Verify checks what Run wrote into c.Output, reading it back as a user would: the sums
// file lists every asset with its SHA-256; each archive holds exactly the binary and
// c.Files, owned by 0:0 with the release's mtime, the binary an executable of the
// archive's OS and architecture; the krew manifest has the version, one platform per
// archive of c.KrewCommand with that archive's uri and sum, and no placeholder left; the
// image's oci-archive holds an index of c.ImageArches whose images are configured for
// their architecture and carry the linux archives' binaries of c.ImageCommands.
func Verify(c Config) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	sumsData, err := os.ReadFile(filepath.Join(c.Output, SumsFile))
	if err != nil {
		return err
	}
	sums, err := ParseSums(sumsData)
	if err != nil {
		return fmt.Errorf("%s: %w", SumsFile, err)
	}
	want := []string{c.KrewManifestName()}
	for _, p := range c.Platforms {
		for _, cmd := range c.CommandsFor(p) {
			want = append(want, ArchiveName(cmd.Name, c.Version, p))
		}
	}
	if len(c.ImageArches) > 0 {
		want = append(want, ImageArchiveName(c.ImageCommand, c.Version))
	}
	if got := slices.Sorted(maps.Keys(sums)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		fail("%s lists %q, want %q", SumsFile, got, slices.Sorted(slices.Values(want)))
	}
	for n, sum := range sums {
		actual, err := SumFile(filepath.Join(c.Output, n))
		if err != nil {
			fail("%s: %v", n, err)
		} else if actual != sum {
			fail("%s: sha256 %s, %s says %s", n, actual, SumsFile, sum)
		}
	}

	linuxBinaries := map[string]map[string][]byte{} // linux arch -> image command -> its binary
	for _, p := range c.Platforms {
		for _, cmd := range c.CommandsFor(p) {
			archive := ArchiveName(cmd.Name, c.Version, p)
			bin, err := verifyArchive(filepath.Join(c.Output, archive), BinaryName(cmd.Name, p), p, c.Files, c.Date)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", archive, err))
				continue
			}
			if p.OS == "linux" && slices.Contains(c.ImageCommands(), cmd.Name) {
				if linuxBinaries[p.Arch] == nil {
					linuxBinaries[p.Arch] = map[string][]byte{}
				}
				linuxBinaries[p.Arch][cmd.Name] = bin
			}
		}
	}

	if err := verifyKrew(c, sums); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", c.KrewManifestName(), err))
	}

	if len(c.ImageArches) > 0 {
		archive := ImageArchiveName(c.ImageCommand, c.Version)
		if err := verifyImage(filepath.Join(c.Output, archive), c, linuxBinaries); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", archive, err))
		}
	}
	return errors.Join(errs...)
}

// verifyArchive checks one archive and returns its binary.
func verifyArchive(file, binary string, p Platform, extra []string, date time.Time) ([]byte, error) {
	entries, err := ReadArchive(file)
	if err != nil {
		return nil, err
	}
	want := []string{binary}
	wantData := map[string]string{}
	for _, f := range extra {
		want = append(want, filepath.Base(f))
		wantData[filepath.Base(f)] = f
	}
	slices.Sort(want)
	var names []string
	var bin []byte
	var errs []error
	for _, e := range entries {
		h := e.Header
		names = append(names, h.Name)
		if h.Typeflag != tar.TypeReg {
			errs = append(errs, fmt.Errorf("%s is not a regular file", h.Name))
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			errs = append(errs, fmt.Errorf("%s owned by %d:%d (%q:%q), want 0:0", h.Name, h.Uid, h.Gid, h.Uname, h.Gname))
		}
		if !h.ModTime.Equal(date.Truncate(time.Second)) {
			errs = append(errs, fmt.Errorf("%s mtime %s, want the commit's time %s", h.Name, h.ModTime.UTC().Format(time.RFC3339), date.UTC().Format(time.RFC3339)))
		}
		switch src, isExtra := wantData[h.Name]; {
		case h.Name == binary:
			bin = e.Data
			if h.Mode != 0o755 {
				errs = append(errs, fmt.Errorf("%s mode %o, want 755", h.Name, h.Mode))
			}
			if err := CheckExecutable(e.Data, p); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", h.Name, err))
			}
		case isExtra:
			orig, err := os.ReadFile(src)
			if err != nil {
				errs = append(errs, err)
			} else if !bytes.Equal(orig, e.Data) {
				errs = append(errs, fmt.Errorf("%s differs from %s", h.Name, src))
			}
			if h.Mode != 0o644 {
				errs = append(errs, fmt.Errorf("%s mode %o, want 644", h.Name, h.Mode))
			}
		}
	}
	if !slices.Equal(names, want) {
		errs = append(errs, fmt.Errorf("holds %q, want %q (sorted)", names, want))
	}
	return bin, errors.Join(errs...)
}

// CheckExecutable says whether data is a static executable for p: ELF on linux (no
// dynamic loader), Mach-O on darwin, PE on windows, of p's architecture.
func CheckExecutable(data []byte, p Platform) error {
	r := bytes.NewReader(data)
	switch p.OS {
	case "linux":
		machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Arch]
		f, err := elf.NewFile(r)
		if err != nil {
			return fmt.Errorf("not an ELF file: %w", err)
		}
		defer f.Close()
		if f.Machine != machine || machine == 0 {
			return fmt.Errorf("ELF for %s, want %s", f.Machine, p)
		}
		if f.Type != elf.ET_EXEC {
			return fmt.Errorf("ELF type %s, want an executable", f.Type)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				return errors.New("needs a dynamic loader: not a static binary")
			}
		}
	case "darwin":
		cpu := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[p.Arch]
		f, err := macho.NewFile(r)
		if err != nil {
			return fmt.Errorf("not a Mach-O file: %w", err)
		}
		defer f.Close()
		if f.Cpu != cpu || cpu == 0 {
			return fmt.Errorf("Mach-O for %s, want %s", f.Cpu, p)
		}
		if f.Type != macho.TypeExec {
			return fmt.Errorf("Mach-O type %s, want an executable", f.Type)
		}
	case "windows":
		machine := map[string]uint16{"amd64": pe.IMAGE_FILE_MACHINE_AMD64, "arm64": pe.IMAGE_FILE_MACHINE_ARM64}[p.Arch]
		f, err := pe.NewFile(r)
		if err != nil {
			return fmt.Errorf("not a PE file: %w", err)
		}
		defer f.Close()
		if f.Machine != machine || machine == 0 {
			return fmt.Errorf("PE for machine %#x, want %s", f.Machine, p)
		}
		if f.Characteristics&pe.IMAGE_FILE_EXECUTABLE_IMAGE == 0 || f.Characteristics&pe.IMAGE_FILE_DLL != 0 {
			return fmt.Errorf("PE characteristics %#x: not an executable", f.Characteristics)
		}
	default:
		return fmt.Errorf("no check for %s", p)
	}
	return nil
}

// krewManifest is the part of a krew Plugin that the release fills in.
type krewManifest struct {
	Spec struct {
		Version   string `json:"version"`
		Platforms []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

func verifyKrew(c Config, sums map[string]string) error {
	data, err := os.ReadFile(filepath.Join(c.Output, c.KrewManifestName()))
	if err != nil {
		return err
	}
	var errs []error
	if bytes.Contains(data, []byte("${")) {
		errs = append(errs, errors.New("a ${...} placeholder is left"))
	}
	var m krewManifest
	if err := yaml.Unmarshal(data, &m); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if m.Spec.Version != c.Version {
		errs = append(errs, fmt.Errorf("spec.version %q, want %q", m.Spec.Version, c.Version))
	}
	var seen []string
	for _, pl := range m.Spec.Platforms {
		p := Platform{pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]}
		seen = append(seen, p.String())
		archive := ArchiveName(c.KrewCommand, c.Version, p)
		if path.Base(pl.URI) != archive || !strings.HasSuffix(pl.URI, "/"+c.Version+"/"+archive) {
			errs = append(errs, fmt.Errorf("%s: uri %s, want .../%s/%s", p, pl.URI, c.Version, archive))
		}
		if sum, ok := sums[archive]; !ok || pl.Sha256 != sum {
			errs = append(errs, fmt.Errorf("%s: sha256 %q, %s says %q for %s", p, pl.Sha256, SumsFile, sum, archive))
		}
		if pl.Bin != BinaryName(c.KrewCommand, p) {
			errs = append(errs, fmt.Errorf("%s: bin %q, want %q", p, pl.Bin, BinaryName(c.KrewCommand, p)))
		}
	}
	var built []string
	for _, p := range c.Platforms {
		if slices.ContainsFunc(c.CommandsFor(p), func(cmd Command) bool { return cmd.Name == c.KrewCommand }) {
			built = append(built, p.String())
		}
	}
	slices.Sort(seen)
	slices.Sort(built)
	if !slices.Equal(seen, built) {
		errs = append(errs, fmt.Errorf("platforms %q, want those built: %q", seen, built))
	}
	return errors.Join(errs...)
}

// verifyImage reads the oci-archive back as an OCI layout and checks the index it names.
func verifyImage(file string, c Config, linuxBinaries map[string]map[string][]byte) error {
	dir, err := os.MkdirTemp("", "verify-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := extractTar(file, dir); err != nil {
		return err
	}
	if err := verifyBlobs(dir); err != nil {
		return err
	}
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return err
	}
	rootManifest, err := root.IndexManifest()
	if err != nil {
		return err
	}
	if len(rootManifest.Manifests) != 1 || rootManifest.Manifests[0].MediaType != types.OCIImageIndex {
		return fmt.Errorf("index.json lists %d descriptors, want one image index", len(rootManifest.Manifests))
	}
	desc := rootManifest.Manifests[0]
	ref, err := name.NewTag(c.ImageRef)
	if err != nil {
		return err
	}
	var errs []error
	if want := operatorimage.RefAnnotations(ref); !maps.Equal(desc.Annotations, want) {
		errs = append(errs, fmt.Errorf("index.json annotations %v, want %v", desc.Annotations, want))
	}
	if c.OCILayout != "" {
		if err := sameIndex(c.OCILayout, desc.Digest); err != nil {
			errs = append(errs, err)
		}
	}
	idx, err := root.ImageIndex(desc.Digest)
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	var arches []string
	for _, m := range im.Manifests {
		if m.Platform == nil {
			errs = append(errs, fmt.Errorf("manifest %s has no platform", m.Digest))
			continue
		}
		arches = append(arches, m.Platform.Architecture)
		if err := verifyPlatformImage(idx, m, c.ImageCommands(), linuxBinaries[m.Platform.Architecture]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Platform, err))
		}
	}
	if !slices.Equal(arches, c.ImageArches) {
		errs = append(errs, fmt.Errorf("index for linux/%q, want %q", arches, c.ImageArches))
	}
	return errors.Join(errs...)
}

// verifyPlatformImage checks one architecture's image: its config, its entrypoint (the
// first of commands), and a layer holding each of commands, the same as in the archives
// (fromArchives, by command), and nothing else but /etc.
func verifyPlatformImage(idx v1.ImageIndex, desc v1.Descriptor, commands []string, fromArchives map[string][]byte) error {
	p := Platform{desc.Platform.OS, desc.Platform.Architecture}
	if p.OS != "linux" {
		return fmt.Errorf("platform OS %s, want linux", p.OS)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if cfg.OS != p.OS || cfg.Architecture != p.Arch {
		return fmt.Errorf("config for %s/%s", cfg.OS, cfg.Architecture)
	}
	if want := []string{"/" + commands[0]}; !slices.Equal(cfg.Config.Entrypoint, want) {
		return fmt.Errorf("entrypoint %q, want %q", cfg.Config.Entrypoint, want)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	if len(layers) != 1 {
		return fmt.Errorf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	var errs []error
	var found []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if strings.HasPrefix(h.Name, "etc/") {
			continue
		}
		found = append(found, h.Name)
		if !slices.Contains(commands, h.Name) {
			continue
		}
		bin, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := CheckExecutable(bin, p); err != nil {
			errs = append(errs, fmt.Errorf("the layer's %s: %w", h.Name, err))
		} else if !bytes.Equal(bin, fromArchives[h.Name]) {
			errs = append(errs, fmt.Errorf("the layer's %s is not the one in the linux/%s archive", h.Name, p.Arch))
		}
	}
	if want := slices.Sorted(slices.Values(commands)); !slices.Equal(found, want) {
		errs = append(errs, fmt.Errorf("the layer holds %q beside /etc, want %q", found, want))
	}
	return errors.Join(errs...)
}

// sameIndex checks that the OCI layout directory names the index the archive holds.
func sameIndex(dir string, digest v1.Hash) error {
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return err
	}
	m, err := root.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != digest {
		return fmt.Errorf("the OCI layout %s does not name the archive's index %s alone", dir, digest)
	}
	return nil
}

// verifyBlobs checks that every blob of an OCI layout has the digest it is named after.
func verifyBlobs(dir string) error {
	blobs := filepath.Join(dir, "blobs", "sha256")
	entries, err := os.ReadDir(blobs)
	if err != nil {
		return err
	}
	for _, e := range entries {
		sum, err := SumFile(filepath.Join(blobs, e.Name()))
		if err != nil {
			return err
		}
		if sum != e.Name() {
			return fmt.Errorf("blob %s has sha256 %s", e.Name(), sum)
		}
	}
	return nil
}

// extractTar unpacks an uncompressed tar of regular files and directories into dir.
func extractTar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("entry %q leaves the archive's directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.Create(target)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q of type %c: want files and directories only", h.Name, h.Typeflag)
		}
	}
}
