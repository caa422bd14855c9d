package printer

import (
	"testing"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

func TestSummaryPlurals(t *testing.T) {
	got := Summary(homelabv1.GpuInventoryStatus{TotalGpuNodes: 1, ReadyGpuNodes: 1, TotalGpus: 8, ReadyGpus: 8})
	if want := "1 GPU node, 1 ready; 8 GPUs, 8 ready"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
}
