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

package repocheck

import (
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// binaryForbidden are packages the operator and kubectl-gpuinv must not link: each registers
// or references every built-in API group (cli-runtime kustomize too), whose code and tables
// would then be resident in the binary (docs/design/clients.md). Tests and the tools may use
// them.
var binaryForbidden = []string{
	"k8s.io/cli-runtime",
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/discovery",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/applyconfigurations",
	"k8s.io/client-go/tools/leaderelection",
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/clientset",
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/informers",
	"github.com/youngju-dev/gpu-inventory-operator/pkg/generated/applyconfiguration",
}

// TestBinariesLinkNoClientset fails when the operator's or the plugin's binary imports,
// directly or not, a package of binaryForbidden, naming the packages that import it.
func TestBinariesLinkNoClientset(t *testing.T) {
	for _, bin := range []string{"gpu-inventory-operator", "kubectl-gpuinv", "gpu-fleet-hub"} {
		t.Run(bin, func(t *testing.T) { linksNoClientset(t, "./cmd/"+bin) })
	}
}

func linksNoClientset(t *testing.T, main string) {
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, main)
	cmd.Dir = devDocRepoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	importers := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			importers[imp] = append(importers[imp], fields[0])
		}
	}
	for _, imp := range slices.Sorted(maps.Keys(importers)) {
		by := importers[imp]
		if forbidden(imp) && slices.ContainsFunc(by, func(p string) bool { return !forbidden(p) }) {
			t.Errorf("%s links %s (imported by %s): use pkg/kubeclient instead", main, imp, strings.Join(slices.DeleteFunc(by, forbidden), ", "))
		}
	}
}

func forbidden(pkg string) bool {
	return slices.ContainsFunc(binaryForbidden, func(f string) bool { return pkg == f || strings.HasPrefix(pkg, f+"/") })
}

// TestForbiddenMatchesWholePathElements keeps a package whose path merely starts like a
// forbidden one (k8s.io/client-go/kubernetesx) allowed.
func TestForbiddenMatchesWholePathElements(t *testing.T) {
	for pkg, want := range map[string]bool{
		"k8s.io/client-go/kubernetes":                 true,
		"k8s.io/client-go/kubernetes/scheme":          true,
		"k8s.io/client-go/kubernetesx":                false,
		"k8s.io/cli-runtime/pkg/printers":             true,
		"k8s.io/client-go/rest":                       false,
		"k8s.io/client-go/tools/leaderelection/lease": true,
	} {
		if got := forbidden(pkg); got != want {
			t.Errorf("forbidden(%q) = %t, want %t", pkg, got, want)
		}
	}
}
