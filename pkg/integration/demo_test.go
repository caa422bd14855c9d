//go:build integration

package integration

import (
	"bytes"
	"strings"
	"testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/demo"
)

// `make demo` prints the home lab next to the healthy kwok nodes.
func TestDemoPrintsTheInventory(t *testing.T) {
	var out bytes.Buffer
	if err := demo.Run(testContext(t), demo.Options{Operator: operatorBinary, Once: true, Out: &out}); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"GpuInventory cluster: 7 GPU nodes, 3 ready; 24 GPUs, 23 ready",
		"Degraded: 4 of 7 GPU nodes are not Ready: nuc1, nuc2, omen, omen2",
		"NODE        READY  PRODUCT                                    GPUS  MEMORY     WORKLOAD",
		"dgx-h100-1  true   NVIDIA-H100-80GB-HBM3                      8     81559 MiB  container",
		"nuc1        false  NVIDIA-GeForce-RTX-4070-Laptop-GPU-SHARED  1     8188 MiB   vm-passthrough",
		"nuc2        false  <unlabeled>                                0                vm-passthrough",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}
