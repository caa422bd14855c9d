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

// Command image builds the operator's container image without a container daemon (package
// operatorimage): the entrypoint binary (--binary) and any others (--extra-binary, the fleet
// hub in `make image`) side by side in /. For one architecture, an image tarball that `docker load`, `podman load`,
// `kind load image-archive` and `crane push` accept; for several (--arch amd64,arm64), a
// multi-architecture OCI image index, written as an OCI layout directory (--oci-layout) or
// an oci-archive tarball (--oci-archive). `make image` runs it; hack/image/Dockerfile is the
// same image for people who build with Docker.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/youngju-dev/gpu-inventory-operator/hack/image/operatorimage"
)

// outputs are the files to write; empty fields are not written.
type outputs struct {
	tarball    string // docker-style image tarball (one architecture)
	ociLayout  string // OCI layout directory of the image index
	ociArchive string // oci-archive tarball of the image index
}

func main() {
	var arches, binaries, version, tag string
	var extra []string
	var out outputs
	flag.StringVar(&binaries, "binary", "bin/linux-amd64/gpu-inventory-operator", "static linux binary to put in the image as /<its name>, the entrypoint; with several --arch, a comma-separated list in the same order")
	flag.Func("extra-binary", "`path` of another static linux binary to put in the image as /<its name> beside the entrypoint (repeat for more); with several --arch, a comma-separated list in the same order", func(v string) error {
		extra = append(extra, v)
		return nil
	})
	flag.StringVar(&arches, "arch", "amd64", "GOARCH the binaries were built for; a comma-separated list (amd64,arm64) builds a multi-architecture image index")
	flag.StringVar(&version, "version", "dev", "image version label")
	flag.StringVar(&tag, "tag", "gpu-inventory-operator:dev", "image reference recorded in the output")
	flag.StringVar(&out.tarball, "output", "bin/gpu-inventory-operator-image.tar", "image tarball to write (one --arch only; docker/podman load it)")
	flag.StringVar(&out.ociLayout, "oci-layout", "", "OCI layout directory to write the image index to (crane push DIR REF, skopeo copy oci:DIR)")
	flag.StringVar(&out.ociArchive, "oci-archive", "", "oci-archive tarball to write the image index to (skopeo copy oci-archive:FILE, podman load, docker load with the containerd image store)")
	flag.Parse()
	// --output is written by default, as before, unless only the index outputs are asked for.
	explicit := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if !explicit["output"] && (out.ociLayout != "" || out.ociArchive != "") {
		out.tarball = ""
	}

	specs, err := specsFor(strings.Split(arches, ","), strings.Split(binaries, ","), extra, version)
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(2)
	}
	// Reproducible by default: the same binary gives the same image digest.
	created := time.Unix(0, 0).UTC()
	if epoch := os.Getenv("SOURCE_DATE_EPOCH"); epoch != "" {
		secs, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "image: SOURCE_DATE_EPOCH %q is not a number of seconds\n", epoch)
			os.Exit(2)
		}
		created = time.Unix(secs, 0).UTC()
	}
	for i := range specs {
		specs[i].Created = created
	}
	if err := run(specs, tag, out); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

// specsFor pairs each architecture with its binaries: the i-th of --binary's list and of
// each --extra-binary's list are for the i-th architecture.
func specsFor(arches, binaries, extra []string, version string) ([]operatorimage.Spec, error) {
	if len(arches) != len(binaries) {
		return nil, fmt.Errorf("%d architectures (--arch) and %d binaries (--binary): give one binary per architecture", len(arches), len(binaries))
	}
	specs := make([]operatorimage.Spec, len(arches))
	for i := range arches {
		specs[i] = operatorimage.Spec{Binary: binaries[i], Arch: arches[i], Version: version}
	}
	for _, list := range extra {
		perArch := strings.Split(list, ",")
		if len(perArch) != len(arches) {
			return nil, fmt.Errorf("%d architectures (--arch) and %d binaries in --extra-binary %q: give one binary per architecture", len(arches), len(perArch), list)
		}
		for i, bin := range perArch {
			specs[i].Extra = append(specs[i].Extra, bin)
		}
	}
	return specs, nil
}

func run(specs []operatorimage.Spec, tag string, out outputs) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("--tag %q: %w", tag, err)
	}
	if out.tarball != "" {
		if len(specs) != 1 {
			return fmt.Errorf("an image tarball (--output) holds one architecture, not %d: use --oci-archive or --oci-layout", len(specs))
		}
		img, err := operatorimage.Build(specs[0])
		if err != nil {
			return err
		}
		if err := tarball.WriteToFile(out.tarball, ref, img); err != nil {
			return errors.Join(fmt.Errorf("write %s", out.tarball), err)
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%s: %s %s (linux/%s)\n", out.tarball, ref, digest, specs[0].Arch)
	}
	if out.ociLayout == "" && out.ociArchive == "" {
		return nil
	}
	idx, err := operatorimage.Index(specs)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if out.ociLayout != "" {
		if err := operatorimage.WriteLayout(out.ociLayout, idx, ref); err != nil {
			return err
		}
		fmt.Printf("%s: %s %s (image index)\n", out.ociLayout, ref, digest)
	}
	if out.ociArchive != "" {
		if err := operatorimage.WriteOCIArchive(out.ociArchive, idx, ref, specs[0].Created); err != nil {
			return err
		}
		fmt.Printf("%s: %s %s (image index)\n", out.ociArchive, ref, digest)
	}
	return nil
}
