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

// Command release writes a release's assets into one directory: a tar.gz archive of each
// binary for each platform it is released for (the binary, LICENSE and README.md; the fleet
// hub, a server, for linux and darwin only), the operator's multi-architecture container
// image, which holds the fleet hub too, as an oci-archive (and, with --oci-layout, as an OCI
// layout directory), the krew manifest rendered from hack/krew/gpuinv.yaml with the
// archives' sums, and SHA256SUMS. Everything is reproducible from the commit: the binaries
// are built with -trimpath and the given -ldflags, and archive mtimes and the image's
// creation time are the commit's time. It then reads everything back and checks it
// (Verify). `make release` runs it; see docs/development.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	c := Config{
		Commands: []Command{
			{Name: "gpu-inventory-operator", Package: "./cmd/gpu-inventory-operator"},
			{Name: "gpu-fleet-hub", Package: "./cmd/gpu-fleet-hub", OSes: []string{"linux", "darwin"}},
			{Name: "kubectl-gpuinv", Package: "./cmd/kubectl-gpuinv"},
		},
		KrewCommand:  "kubectl-gpuinv",
		ImageCommand: "gpu-inventory-operator",
		ImageExtra:   []string{"gpu-fleet-hub"},
	}
	var date, platforms, arches, files string
	flag.StringVar(&c.Version, "version", "", "release version, v-prefixed semantic version (v0.1.0)")
	flag.StringVar(&c.LDFlags, "ldflags", "", "go build -ldflags for every binary (the Makefile's, which stamp the version, commit and build date)")
	flag.StringVar(&date, "date", "", "the commit's time, RFC 3339: archive mtimes and the image's creation time")
	flag.StringVar(&c.Go, "go", "go", "go command")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64", "os/arch list to build the binaries for")
	flag.StringVar(&files, "files", "LICENSE,README.md", "files put beside the binary in every archive")
	flag.StringVar(&c.KrewTemplate, "krew-template", "hack/krew/gpuinv.yaml", "krew manifest template")
	flag.StringVar(&arches, "image-arch", "amd64,arm64", "architectures of the container image index (linux); empty for no image")
	flag.StringVar(&c.ImageRef, "image", "", "image reference recorded in the OCI layout (default gpu-inventory-operator:<version>)")
	flag.StringVar(&c.Output, "output", "bin/release", "directory to write the assets to")
	flag.StringVar(&c.OCILayout, "oci-layout", "", "also write the image index as an OCI layout directory here (crane push DIR REF)")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(2, "unexpected arguments %q", flag.Args())
	}

	var err error
	if c.Platforms, err = ParsePlatforms(platforms); err != nil {
		fail(2, "--platforms: %v", err)
	}
	if date != "" {
		if c.Date, err = time.Parse(time.RFC3339, date); err != nil {
			fail(2, "--date: %v", err)
		}
	}
	if files != "" {
		c.Files = strings.Split(files, ",")
	}
	if arches != "" {
		c.ImageArches = strings.Split(arches, ",")
	}
	if c.ImageRef == "" {
		c.ImageRef = "gpu-inventory-operator:" + c.Version
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := Run(ctx, c); err != nil {
		fail(1, "%v", err)
	}
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "release: "+format+"\n", args...)
	os.Exit(code)
}
