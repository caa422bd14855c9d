package plugin

import (
	"os/exec"
	"strings"
	"testing"
)

// The plugin is a small client: it must not link the operator's controllers or its metrics
// (and with them Prometheus's client), which the packages it shares with the operator keep
// out of their imports.
func TestPluginLinksNoControllerOrMetrics(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/youngju-dev/gpu-inventory-operator/cmd/kubectl-gpuinv").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const module = "github.com/youngju-dev/gpu-inventory-operator/"
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(dep, module+"pkg/controller"), dep == module+"pkg/metrics", strings.HasPrefix(dep, module+"pkg/metrics/"),
			strings.HasPrefix(dep, "github.com/prometheus/"), strings.HasPrefix(dep, "sigs.k8s.io/controller-runtime"):
			t.Errorf("kubectl-gpuinv depends on %s", dep)
		}
	}
	if !strings.Contains(string(out), module+"pkg/plugin\n") {
		t.Errorf("go list named no pkg/plugin: the test reads the wrong output:\n%s", out)
	}
}
