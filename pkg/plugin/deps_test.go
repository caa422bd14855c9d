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
	"os/exec"
	"strings"
	"testing"
)

// The plugin is a small client: it must not link the operator's controllers or its metrics,
// which the packages it shares with the operator keep out of their imports. (Prometheus's
// client library comes in with the scheduler's CEL environment, which why and fit need; the
// plugin registers and serves no metrics.)
func TestPluginLinksNoControllerOrMetrics(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/youngju-dev/gpu-inventory-operator/cmd/kubectl-gpuinv").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const module = "github.com/youngju-dev/gpu-inventory-operator/"
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(dep, module+"pkg/controller"), dep == module+"pkg/metrics", strings.HasPrefix(dep, module+"pkg/metrics/"),
			strings.HasPrefix(dep, "sigs.k8s.io/controller-runtime"):
			t.Errorf("kubectl-gpuinv depends on %s", dep)
		}
	}
	if !strings.Contains(string(out), module+"pkg/plugin\n") {
		t.Errorf("go list named no pkg/plugin: the test reads the wrong output:\n%s", out)
	}
}
