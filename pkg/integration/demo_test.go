//go:build integration

package integration

import (
	"bytes"
	"strings"
	"testing"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/demo"
)

// `make demo` prints the home lab next to the healthy kwok nodes, as `kubectl gpuinv` does.
func TestDemoPrintsTheInventory(t *testing.T) {
	var out bytes.Buffer
	if err := demo.Run(testContext(t), demo.Options{Operator: operatorBinary, Once: true, Out: &out}); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"GPU nodes:       3/7 ready",
		"GPUs:            23/24 ready, 0 unhealthy",
		"Degraded:        True (4 of 7 GPU nodes are not Ready: nuc1, nuc2, omen, omen2)",
		"NVIDIA-A100-SXM4-40GB               MIG-1g.5gb  1/1          14/14       0          4864 MiB",
		"NODE        READY  PRODUCT                                    GPUS  MEMORY     WORKLOAD        NOTES",
		"a100-mig-1  true   NVIDIA-A100-SXM4-40GB-MIG-1g.5gb           14    4864 MiB   container       MIG 14x1g.5gb",
		"dgx-h100-1  true   NVIDIA-H100-80GB-HBM3                      8     81559 MiB  container",
		"nuc1        false  NVIDIA-GeForce-RTX-4070-Laptop-GPU-SHARED  1     8188 MiB   vm-passthrough  NotReady",
		"omen2       false  <unlabeled>                                0                container       NotReady, Unreachable",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}
