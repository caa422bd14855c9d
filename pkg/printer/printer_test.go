package printer

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestHomeLabGolden(t *testing.T) {
	content, _ := inventory.Compute(fixtures.HomeLab(), nil, time.Time{})
	gi := &homelabv1.GpuInventory{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Status: homelabv1.GpuInventoryStatus{
		TotalGpuNodes: content.TotalGpuNodes, ReadyGpuNodes: content.ReadyGpuNodes, TotalGpus: content.TotalGpus, ReadyGpus: content.ReadyGpus,
		Nodes: content.Nodes, Conditions: []metav1.Condition{inventory.DegradedCondition(content, 1)},
	}}
	var buf bytes.Buffer
	if err := Inventory(&buf, gi); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "homelab.txt")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run `go test ./pkg/printer -update` to create it)", err)
	}
	if buf.String() != string(want) {
		t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", golden, buf.String(), want)
	}
}

func TestSummaryPlurals(t *testing.T) {
	got := Summary(homelabv1.GpuInventoryStatus{TotalGpuNodes: 1, ReadyGpuNodes: 1, TotalGpus: 8, ReadyGpus: 8})
	if want := "1 GPU node, 1 ready; 8 GPUs, 8 ready"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
}
