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

package plugin

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is the part of a krew Plugin manifest that the template fills in.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

func TestKrewManifestTemplate(t *testing.T) {
	template, err := os.ReadFile("../../hack/krew/gpuinv.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sha := strings.Repeat("ab", 32)
	unknown := map[string]bool{}
	rendered := os.Expand(string(template), func(name string) string {
		switch {
		case name == "VERSION":
			return "v1.2.3"
		case strings.HasPrefix(name, "SHA256_"):
			return sha
		}
		unknown[name] = true
		return ""
	})
	if len(unknown) > 0 {
		t.Errorf("placeholders other than VERSION and SHA256_*: %v", unknown)
	}
	var p krewPlugin
	if err := yaml.UnmarshalStrict([]byte(rendered), &p, yaml.DisallowUnknownFields); err != nil {
		t.Fatalf("rendered manifest: %v", err)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "gpuinv" ||
		p.Spec.Version != "v1.2.3" || p.Spec.ShortDescription == "" || p.Spec.Homepage == "" {
		t.Errorf("manifest header: %+v", p)
	}
	name := regexp.MustCompile(`/v1\.2\.3/kubectl-gpuinv_v1\.2\.3_([a-z]+)_([a-z0-9]+)\.tar\.gz$`)
	seen := map[string]bool{}
	for _, pl := range p.Spec.Platforms {
		os, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		m := name.FindStringSubmatch(pl.URI)
		if m == nil || m[1] != os || m[2] != arch {
			t.Errorf("platform %s/%s: uri %s does not name its archive", os, arch, pl.URI)
		}
		wantBin := "kubectl-gpuinv"
		if os == "windows" {
			wantBin += ".exe"
		}
		if pl.Sha256 != sha || pl.Bin != wantBin {
			t.Errorf("platform %s/%s: sha256 %q, bin %q", os, arch, pl.Sha256, pl.Bin)
		}
		seen[os+"/"+arch] = true
	}
	for _, want := range []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64"} {
		if !seen[want] {
			t.Errorf("no platform %s", want)
		}
	}
}
