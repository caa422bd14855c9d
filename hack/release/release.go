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
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/youngju-dev/gpu-inventory-operator/hack/image/operatorimage"
)

// Platform is a GOOS/GOARCH pair.
type Platform struct {
	OS, Arch string
}

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ParsePlatforms reads "linux/amd64,darwin/arm64".
func ParsePlatforms(s string) ([]Platform, error) {
	var ps []Platform
	for _, f := range strings.Split(s, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || goos == "" || goarch == "" || strings.Contains(goarch, "/") {
			return nil, fmt.Errorf("platform %q: want os/arch", f)
		}
		ps = append(ps, Platform{goos, goarch})
	}
	return ps, nil
}

// Command is a main package released as a binary.
type Command struct {
	Name    string   // the binary's name, without .exe
	Package string   // what go build builds, e.g. ./cmd/kubectl-gpuinv
	OSes    []string // the GOOSes it is released for; empty: every platform's
}

// BuiltFor says whether cmd is released for p.
func (cmd Command) BuiltFor(p Platform) bool {
	return len(cmd.OSes) == 0 || slices.Contains(cmd.OSes, p.OS)
}

// Config is one release.
type Config struct {
	Version   string    // v-prefixed semantic version: krew requires one
	LDFlags   string    // go build -ldflags, stamping Version and the commit
	Date      time.Time // the commit's time: the archives' mtimes and the image's creation time
	Go        string    // the go command
	Commands  []Command
	Platforms []Platform
	Files     []string // added beside the binary in every archive (LICENSE, README.md)

	KrewTemplate string // rendered with Version and the sums of KrewCommand's archives
	KrewCommand  string

	ImageCommand string   // the command the container image runs
	ImageExtra   []string // more commands in the image, each at /<name> beside ImageCommand
	ImageArches  []string // linux architectures of the image index
	ImageRef     string   // recorded in the image's OCI layout

	Output    string // directory the assets are written to
	OCILayout string // if set, the image index is also written here as an OCI layout directory
}

// Names of the assets in Config.Output.
const SumsFile = "SHA256SUMS"

// ArchiveName is the name of command's archive for p, as the krew manifest's uri names it.
func ArchiveName(command, version string, p Platform) string {
	return fmt.Sprintf("%s_%s_%s_%s.tar.gz", command, version, p.OS, p.Arch)
}

// BinaryName is command's file name on p.
func BinaryName(command string, p Platform) string {
	if p.OS == "windows" {
		return command + ".exe"
	}
	return command
}

// ImageArchiveName is the name of the image index's oci-archive.
func ImageArchiveName(command, version string) string {
	return fmt.Sprintf("%s_%s_image.oci.tar", command, version)
}

// KrewManifestName is the rendered manifest's name: the template's.
func (c Config) KrewManifestName() string { return filepath.Base(c.KrewTemplate) }

// Check says what is wrong with c before anything is built.
func (c Config) Check() error {
	if !strings.HasPrefix(c.Version, "v") {
		return fmt.Errorf("version %q: a release version starts with v (krew requires it); tag the commit or set VERSION=v0.1.0", c.Version)
	}
	if _, err := utilversion.ParseSemantic(c.Version); err != nil {
		return fmt.Errorf("version %q is not a semantic version (krew requires one): %w", c.Version, err)
	}
	if c.Date.IsZero() {
		return fmt.Errorf("no date: the archives' mtimes and the image's creation time come from the commit's time")
	}
	if len(c.Commands) == 0 || len(c.Platforms) == 0 {
		return fmt.Errorf("nothing to build: %d commands, %d platforms", len(c.Commands), len(c.Platforms))
	}
	has := map[Platform]bool{}
	for _, p := range c.Platforms {
		if has[p] {
			return fmt.Errorf("platform %s given twice", p)
		}
		has[p] = true
	}
	commands := map[string]Command{}
	for _, cmd := range c.Commands {
		commands[cmd.Name] = cmd
	}
	for _, cmd := range append([]string{c.KrewCommand}, c.ImageCommands()...) {
		if _, ok := commands[cmd]; !ok {
			return fmt.Errorf("command %q is not among those built", cmd)
		}
	}
	for _, arch := range c.ImageArches {
		if !has[Platform{"linux", arch}] {
			return fmt.Errorf("the image needs linux/%s, which is not among the platforms built", arch)
		}
		for _, cmd := range c.ImageCommands() {
			if !commands[cmd].BuiltFor(Platform{"linux", arch}) {
				return fmt.Errorf("the image needs %s for linux/%s, which it is not built for", cmd, arch)
			}
		}
	}
	if _, err := name.NewTag(c.ImageRef); err != nil {
		return fmt.Errorf("image reference %q: %w", c.ImageRef, err)
	}
	return nil
}

// ImageCommands are the commands in the container image, its entrypoint first.
func (c Config) ImageCommands() []string {
	return append([]string{c.ImageCommand}, c.ImageExtra...)
}

// CommandsFor are the commands released for p.
func (c Config) CommandsFor(p Platform) []Command {
	var cmds []Command
	for _, cmd := range c.Commands {
		if cmd.BuiltFor(p) {
			cmds = append(cmds, cmd)
		}
	}
	return cmds
}

// Run builds every command for every platform, writes their archives, the container image
// index, the krew manifest and the sums file into c.Output, then checks them with Verify.
func Run(ctx context.Context, c Config) error {
	if err := c.Check(); err != nil {
		return err
	}
	if err := os.MkdirAll(c.Output, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "gpu-inventory-operator-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	var assets []string
	binaries := map[Platform]string{} // where each platform's binaries are
	for _, p := range c.Platforms {
		dir := filepath.Join(work, p.OS+"_"+p.Arch)
		binaries[p] = dir
		archives, err := buildPlatform(ctx, c, p, dir)
		if err != nil {
			return err
		}
		assets = append(assets, archives...)
	}
	if len(c.ImageArches) > 0 {
		archive, err := writeImage(c, binaries, work)
		if err != nil {
			return err
		}
		assets = append(assets, archive)
	}
	if err := writeKrewAndSums(c, assets); err != nil {
		return err
	}
	logf("verify %s", c.Output)
	return Verify(c)
}

// buildPlatform builds every command released for p into dir and writes their archives into
// c.Output; it returns the archives' names.
func buildPlatform(ctx context.Context, c Config, p Platform, dir string) ([]string, error) {
	for _, cmd := range c.CommandsFor(p) {
		logf("build %s for %s", cmd.Name, p)
		if err := Build(ctx, c.Go, cmd.Package, p, c.LDFlags, filepath.Join(dir, BinaryName(cmd.Name, p))); err != nil {
			return nil, err
		}
	}
	var archives []string
	for _, cmd := range c.CommandsFor(p) {
		archive := ArchiveName(cmd.Name, c.Version, p)
		files := []ArchiveFile{{Name: BinaryName(cmd.Name, p), Source: filepath.Join(dir, BinaryName(cmd.Name, p)), Mode: 0o755}}
		for _, f := range c.Files {
			files = append(files, ArchiveFile{Name: filepath.Base(f), Source: f, Mode: 0o644})
		}
		if err := WriteArchive(filepath.Join(c.Output, archive), files, c.Date); err != nil {
			return nil, fmt.Errorf("archive %s: %w", archive, err)
		}
		archives = append(archives, archive)
	}
	return archives, nil
}

// writeImage writes the image index of c.ImageCommands built for c.ImageArches (binaries
// says where each platform's binaries are) as an OCI layout (c.OCILayout, or one in work)
// and as an oci-archive in c.Output; it returns the archive's name.
func writeImage(c Config, binaries map[Platform]string, work string) (string, error) {
	logf("image index for linux/%s", strings.Join(c.ImageArches, ", linux/"))
	var specs []operatorimage.Spec
	for _, arch := range c.ImageArches {
		dir := binaries[Platform{"linux", arch}]
		spec := operatorimage.Spec{
			Binary:  filepath.Join(dir, c.ImageCommand),
			Arch:    arch,
			Version: c.Version,
			Created: c.Date,
		}
		for _, cmd := range c.ImageExtra {
			spec.Extra = append(spec.Extra, filepath.Join(dir, cmd))
		}
		specs = append(specs, spec)
	}
	idx, err := operatorimage.Index(specs)
	if err != nil {
		return "", err
	}
	ref, _ := name.NewTag(c.ImageRef) // checked by Check
	layoutDir := c.OCILayout
	if layoutDir == "" {
		layoutDir = filepath.Join(work, "oci-layout")
	}
	if err := operatorimage.WriteLayout(layoutDir, idx, ref); err != nil {
		return "", err
	}
	archive := ImageArchiveName(c.ImageCommand, c.Version)
	if err := operatorimage.ArchiveLayout(layoutDir, filepath.Join(c.Output, archive), c.Date); err != nil {
		return "", err
	}
	return archive, nil
}

// writeKrewAndSums renders the krew manifest with the sums of the assets and writes it and
// the sums file, which lists the assets and the manifest, into c.Output.
func writeKrewAndSums(c Config, assets []string) error {
	sums, err := SumFiles(c.Output, assets)
	if err != nil {
		return err
	}
	template, err := os.ReadFile(c.KrewTemplate)
	if err != nil {
		return err
	}
	manifest, err := RenderKrew(template, c.Version, c.KrewCommand, sums)
	if err != nil {
		return fmt.Errorf("render %s: %w", c.KrewTemplate, err)
	}
	if err := os.WriteFile(filepath.Join(c.Output, c.KrewManifestName()), manifest, 0o644); err != nil {
		return err
	}
	if sums[c.KrewManifestName()], err = SumFile(filepath.Join(c.Output, c.KrewManifestName())); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Output, SumsFile), FormatSums(sums), 0o644)
}

// Build compiles pkg for p as a static binary (CGO_ENABLED=0, -trimpath) at out.
func Build(ctx context.Context, goCmd, pkg string, p Platform, ldflags, out string) error {
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %w\n%s", pkg, p, err, output)
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "release: "+format+"\n", args...)
}
