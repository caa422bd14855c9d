//go:build integration

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

package integration

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/testenv"
)

// What the GPU Operator in its DRA mode leaves on a node: no GFD labels, no nvidia.com/gpu
// capacity (the driver publishes devices, not an extended resource).
var draModeLabels = fixtures.DRAModeLabels()

// readyNode is a Ready node with labels and, when gpus > 0, nvidia.com/gpu capacity and
// allocatable, created with its status as a kubelet would report it.
func readyNode(name string, labels map[string]string, gpus int64) *corev1.Node {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("63"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
	for k, v := range labels {
		node.Labels[k] = v
	}
	if gpus > 0 {
		node.Status.Capacity["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
		node.Status.Allocatable["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return node
}

// driverSlices returns the slices of a DRA fixture moved to node: pool and nodeName are the
// node's, and each slice is created with the driver's generateName <node>-gpu.nvidia.com-.
func driverSlices(t *testing.T, fixture, node string) []*resourcev1.ResourceSlice {
	t.Helper()
	out, err := dra.Slices(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out {
		s.Name = ""
		s.GenerateName = node + "-" + s.Spec.Driver + "-"
		s.Spec.NodeName = ptr.To(node)
		s.Spec.Pool.Name = node
	}
	return out
}

// publish creates slices as the driver does.
func (c *cluster) publish(t *testing.T, slices ...*resourcev1.ResourceSlice) {
	t.Helper()
	for _, s := range slices {
		if _, err := c.kube.ResourceV1().ResourceSlices().Create(context.Background(), s, metav1.CreateOptions{FieldManager: "gpu.nvidia.com"}); err != nil {
			t.Fatalf("create ResourceSlice for node %s: %v", *s.Spec.NodeName, err)
		}
	}
}

// nodeSlice returns the only gpu.nvidia.com slice of node.
func (c *cluster) nodeSlice(t *testing.T, node string) *resourcev1.ResourceSlice {
	t.Helper()
	list, err := c.kube.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatalf("list the ResourceSlices of %s: %v", node, err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("node %s has %d ResourceSlices, want 1", node, len(list.Items))
	}
	return &list.Items[0]
}

// waitInventory polls the inventory "cluster" until check accepts a status written for the
// current generation, and returns that inventory.
func (c *cluster) waitInventory(t *testing.T, what string, check func(gi *homelabv1.GpuInventory) error) *homelabv1.GpuInventory {
	t.Helper()
	var gi *homelabv1.GpuInventory
	eventually(t, 20*time.Second, what, func() error {
		var err error
		gi, err = c.gpu.HomelabV1().GpuInventories().Get(context.Background(), "cluster", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if gi.Status.ObservedGeneration != gi.Generation || gi.Status.InventoryHash == "" {
			return fmt.Errorf("status of generation %d, want %d", gi.Status.ObservedGeneration, gi.Generation)
		}
		return check(gi)
	})
	return gi
}

// entryOf returns node's entry in the status (false when absent).
func entryOf(gi *homelabv1.GpuInventory, node string) (homelabv1.GpuNodeEntry, bool) {
	for _, n := range gi.Status.Nodes {
		if n.Name == node {
			return n, true
		}
	}
	return homelabv1.GpuNodeEntry{}, false
}

// waitRecord polls node's GpuNode record until check accepts it.
func (c *cluster) waitRecord(t *testing.T, node string, check func(spec homelabv1.GpuNodeSpec) error) homelabv1.GpuNodeSpec {
	t.Helper()
	var spec homelabv1.GpuNodeSpec
	eventually(t, 20*time.Second, "GpuNode record "+node, func() error {
		rec, err := c.gpu.HomelabV1().GpuNodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		spec = rec.Spec
		return check(spec)
	})
	return spec
}

// waitMetrics polls op's /metrics until it holds every series line in want.
func waitMetrics(t *testing.T, op *runningOperator, want ...string) {
	t.Helper()
	eventually(t, 20*time.Second, "/metrics", func() error {
		code, body, err := get("http://" + op.MetricsAddress() + "/metrics")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("%d %v", code, err)
		}
		var missing []string
		for _, w := range want {
			if !slices.Contains(strings.Split(body, "\n"), w) {
				missing = append(missing, w)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("no line %q", missing)
		}
		return nil
	})
}

// The nodes of TestDRANodesAreGPUNodes.
const (
	draH100    = "dra-h100-1"    // eight H100s in one complete slice, DRA-mode labels only
	draA100MIG = "dra-a100-1"    // static MIG: one A100 whole, one as four MIG devices
	draLate    = "dra-h100-late" // eight H100s in a pool of two slices, the second published later
	gfdH100    = "gfd-h100-1"    // eight H100s labelled by GPU Feature Discovery
	gkeL4      = "gke-l4-1"      // GKE's accelerator label and nvidia.com/gpu capacity
	pluginOnly = "plugin-1"      // nvidia.com/gpu capacity alone
)

const h100Product = "NVIDIA-H100-80GB-HBM3"

// Nodes run by NVIDIA's DRA driver, with only the GPU Operator's DRA-mode labels, are GPU
// nodes counted from their ResourceSlices beside GFD-labelled, GKE and bare device-plugin
// nodes; an incomplete pool waits for its last slice, device taints and NVSentinel's
// conditions count as unhealthy GPUs, and the records and metrics say the same.
func TestDRANodesAreGPUNodes(t *testing.T) {
	c := startClusterWith(t, testenv.Options{})
	ctx := context.Background()
	if err := testenv.CreateNodes(ctx, c.kube, []*corev1.Node{
		readyNode(draH100, draModeLabels, 0),
		readyNode(draA100MIG, draModeLabels, 0),
		readyNode(draLate, draModeLabels, 0),
		readyNode(gfdH100, map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": h100Product,
			"nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.family": "hopper"}, 8),
		readyNode(gkeL4, map[string]string{"cloud.google.com/gke-accelerator": "nvidia-l4", "cloud.google.com/gke-nodepool": "l4-pool"}, 2),
		readyNode(pluginOnly, nil, 4),
	}); err != nil {
		t.Fatal(err)
	}
	c.publish(t, driverSlices(t, dra.H100, draH100)...)
	c.publish(t, driverSlices(t, dra.A100StaticMIG, draA100MIG)...)
	// The late node's eight GPUs in two slices of four; only the first is published now.
	whole := driverSlices(t, dra.H100, draLate)[0]
	first, second := whole.DeepCopy(), whole.DeepCopy()
	first.Spec.Devices, second.Spec.Devices = whole.Spec.Devices[:4], whole.Spec.Devices[4:]
	first.Spec.Pool.ResourceSliceCount, second.Spec.Pool.ResourceSliceCount = 2, 2
	c.publish(t, first)

	op := startOperator(t, c.env.Config, testOptions())
	// 8 (DRA H100) + 2 (A100, one of them as MIG devices) + 8 (GFD) + 2 (GKE) + 4 (device
	// plugin); the incomplete pool adds none yet.
	gi := c.waitTotals(t, "cluster", totals{Nodes: 6, ReadyNodes: 6, Gpus: 24, ReadyGpus: 24})
	if gi.Status.LabelsMissingNodes != 0 {
		t.Errorf("labelsMissingNodes = %d, want 0: no node lost labels it had", gi.Status.LabelsMissingNodes)
	}

	t.Run("complete pool counts under the GFD node's model", func(t *testing.T) {
		e := nodeEntry(t, gi, draH100)
		if e.GpuCount != 8 || e.Product != h100Product || e.Source != homelabv1.SourceDRA || e.LabelsMissing ||
			e.GpuMemoryMiB != 81559 || e.DriverVersion != "570.124.6" || e.Family != "hopper" || e.ComputeCapability != "9.0" {
			t.Errorf("%s = %+v; want 8 %s (81559 MiB, driver 570.124.6, hopper, 9.0) from source dra, labels not missing", draH100, e, h100Product)
		}
		if slices.Contains(e.Conditions, inventory.NodeDevicesPending) {
			t.Errorf("%s conditions %v: a complete pool is not pending", draH100, e.Conditions)
		}
		var h100 []homelabv1.GpuModel
		for _, m := range gi.Status.Models {
			if strings.Contains(m.Product, "H100") {
				h100 = append(h100, m)
			}
		}
		if len(h100) != 1 || h100[0].Product != h100Product || h100[0].Nodes != 2 || h100[0].Gpus != 16 {
			t.Errorf("H100 models %+v; want one, %s, of 2 nodes and 16 GPUs (the DRA and the GFD node)", h100, h100Product)
		}
	})

	t.Run("static MIG", func(t *testing.T) {
		e := nodeEntry(t, gi, draA100MIG)
		if e.GpuCount != 2 || e.Source != homelabv1.SourceDRA || !strings.HasPrefix(e.Product, "NVIDIA-A100-SXM4-40GB") {
			t.Errorf("%s = %+v; want 2 NVIDIA-A100-SXM4-40GB GPUs from source dra", draA100MIG, e)
		}
		profiles := map[string]int32{}
		if e.MIG != nil {
			for _, d := range e.MIG.Devices {
				profiles[d.Profile] += d.Count
			}
		}
		if want := map[string]int32{"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}; !cmp.Equal(profiles, want) {
			t.Errorf("%s MIG devices per profile = %v, want %v", draA100MIG, profiles, want)
		}
	})

	t.Run("managed cloud and bare device plugin", func(t *testing.T) {
		if e := nodeEntry(t, gi, gkeL4); e.GpuCount != 2 || e.Source != homelabv1.SourceGKE || e.Product != "NVIDIA-L4" {
			t.Errorf("%s = %+v; want 2 NVIDIA-L4 from source gke", gkeL4, e)
		}
		if e := nodeEntry(t, gi, pluginOnly); e.GpuCount != 4 || e.Source != homelabv1.SourceDevicePlugin {
			t.Errorf("%s = %+v; want 4 GPUs from source device-plugin", pluginOnly, e)
		}
	})

	t.Run("incomplete pool waits for its last slice", func(t *testing.T) {
		if e := nodeEntry(t, gi, draLate); e.GpuCount != 0 || !slices.Contains(e.Conditions, inventory.NodeDevicesPending) {
			t.Errorf("%s with 1 of 2 slices = %+v; want 0 GPUs and condition %s", draLate, e, inventory.NodeDevicesPending)
		}
		c.publish(t, second)
		gi := c.waitTotals(t, "cluster", totals{Nodes: 6, ReadyNodes: 6, Gpus: 32, ReadyGpus: 32})
		if e := nodeEntry(t, gi, draLate); e.GpuCount != 8 || e.Product != h100Product || e.Source != homelabv1.SourceDRA ||
			slices.Contains(e.Conditions, inventory.NodeDevicesPending) {
			t.Errorf("%s with 2 of 2 slices = %+v; want 8 %s from source dra, not pending", draLate, e, h100Product)
		}
	})

	t.Run("GpuNode record lists the devices", func(t *testing.T) {
		want := driverSlices(t, dra.H100, draH100)[0].Spec.Devices
		c.waitRecord(t, draH100, func(spec homelabv1.GpuNodeSpec) error {
			if spec.Source != homelabv1.SourceDRA || spec.GpuCount != 8 || spec.Product != h100Product {
				return fmt.Errorf("source %q, %d %q; want dra, 8 %s", spec.Source, spec.GpuCount, spec.Product, h100Product)
			}
			if len(spec.Devices) != len(want) {
				return fmt.Errorf("%d devices, want %d: %+v", len(spec.Devices), len(want), spec.Devices)
			}
			for i, d := range want {
				got := spec.Devices[i]
				uuid, bus := *d.Attributes["uuid"].StringValue, *d.Attributes["resource.kubernetes.io/pciBusID"].StringValue
				if got.Name != d.Name || got.Type != "gpu" || got.UUID != uuid || got.PCIBusID != bus {
					return fmt.Errorf("device %d = %+v; want %s, type gpu, uuid %s, pciBusID %s", i, got, d.Name, uuid, bus)
				}
			}
			return nil
		})
	})

	t.Run("metrics", func(t *testing.T) {
		waitMetrics(t, op,
			`gpu_inventory_source_nodes{inventory="cluster",source="dra"} 3`,
			`gpu_inventory_source_nodes{inventory="cluster",source="gke"} 1`,
			`gpu_inventory_source_nodes{inventory="cluster",source="device-plugin"} 1`,
			`gpu_inventory_unhealthy_gpus{inventory="cluster"} 0`,
		)
	})

	t.Run("device taint added and removed", func(t *testing.T) {
		c.waitInventory(t, "Degraded False before the taint", func(gi *homelabv1.GpuInventory) error {
			if d := findCondition(gi, homelabv1.ConditionDegraded); d == nil || d.Status != metav1.ConditionFalse {
				return fmt.Errorf("Degraded = %+v", d)
			}
			return nil
		})
		// The driver's health monitor taints gpu-3 and republishes the slice.
		slice := c.nodeSlice(t, draH100)
		slice.Spec.Devices[3].Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "79",
			Effect: resourcev1.DeviceTaintEffectNoSchedule, TimeAdded: ptr.To(metav1.Now())}}
		updated, err := c.kube.ResourceV1().ResourceSlices().Update(ctx, slice, metav1.UpdateOptions{FieldManager: "gpu.nvidia.com"})
		if err != nil {
			t.Fatalf("taint %s on %s: %v", slice.Spec.Devices[3].Name, draH100, err)
		}
		if len(updated.Spec.Devices[3].Taints) != 1 {
			t.Fatalf("the API server dropped the device taint (DRADeviceTaints off?): %+v", updated.Spec.Devices[3])
		}
		c.waitInventory(t, "one tainted GPU", func(gi *homelabv1.GpuInventory) error {
			e, _ := entryOf(gi, draH100)
			d := findCondition(gi, homelabv1.ConditionDegraded)
			if gi.Status.UnhealthyGpus != 1 || e.UnhealthyGpus != 1 || d == nil || d.Status != metav1.ConditionTrue ||
				!slices.Contains(e.Conditions, inventory.NodeUnhealthyGPUs) || !slices.Contains(e.Conditions, inventory.NodeDeviceTainted) {
				return fmt.Errorf("unhealthyGpus %d, %s %d %v, Degraded %+v", gi.Status.UnhealthyGpus, draH100, e.UnhealthyGpus, e.Conditions, d)
			}
			return nil
		})
		waitMetrics(t, op, `gpu_inventory_unhealthy_gpus{inventory="cluster"} 1`)

		updated.Spec.Devices[3].Taints = nil
		if _, err := c.kube.ResourceV1().ResourceSlices().Update(ctx, updated, metav1.UpdateOptions{FieldManager: "gpu.nvidia.com"}); err != nil {
			t.Fatalf("remove the taint: %v", err)
		}
		c.waitInventory(t, "taint removed", func(gi *homelabv1.GpuInventory) error {
			e, _ := entryOf(gi, draH100)
			d := findCondition(gi, homelabv1.ConditionDegraded)
			if gi.Status.UnhealthyGpus != 0 || e.UnhealthyGpus != 0 || d == nil || d.Status != metav1.ConditionFalse ||
				slices.Contains(e.Conditions, inventory.NodeDeviceTainted) {
				return fmt.Errorf("unhealthyGpus %d, %s %d %v, Degraded %+v", gi.Status.UnhealthyGpus, draH100, e.UnhealthyGpus, e.Conditions, d)
			}
			return nil
		})
		waitMetrics(t, op, `gpu_inventory_unhealthy_gpus{inventory="cluster"} 0`)
	})

	t.Run("NVSentinel XID condition", func(t *testing.T) {
		node, err := c.kube.CoreV1().Nodes().Get(ctx, gfdH100, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: "SysLogsXIDError", Status: corev1.ConditionTrue,
			Reason: "SysLogsXIDErrorIsNotHealthy", Message: "ErrorCode:79 PCI:0000:18:00 GPU has fallen off the bus",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()})
		if _, err := c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{FieldManager: "nvsentinel"}); err != nil {
			t.Fatalf("set SysLogsXIDError on %s: %v", gfdH100, err)
		}
		c.waitInventory(t, "XIDError on "+gfdH100, func(gi *homelabv1.GpuInventory) error {
			e, _ := entryOf(gi, gfdH100)
			if !slices.Contains(e.Conditions, inventory.NodeXIDError) || e.UnhealthyGpus < 1 || gi.Status.UnhealthyGpus < 1 {
				return fmt.Errorf("%s conditions %v, unhealthy %d; inventory unhealthyGpus %d", gfdH100, e.Conditions, e.UnhealthyGpus, gi.Status.UnhealthyGpus)
			}
			return nil
		})
		waitMetrics(t, op, `gpu_inventory_condition_nodes{condition="XIDError",inventory="cluster"} 1`)
		c.waitRecord(t, gfdH100, func(spec homelabv1.GpuNodeSpec) error {
			if !slices.Contains(spec.Conditions, inventory.NodeXIDError) {
				return fmt.Errorf("spec.conditions %v, want %s", spec.Conditions, inventory.NodeXIDError)
			}
			return nil
		})
	})
}

// klogErrorLine matches klog's text header of an error or fatal line.
var klogErrorLine = regexp.MustCompile(`^[EF]\d{4} `)

// On an API server that does not serve resource.k8s.io/v1 (a cluster before Kubernetes 1.34,
// or with DRA turned off), the operator gives the home lab's report as before and logs no
// error about ResourceSlices.
func TestWithoutResourceAPIHomeLabReportIsUnchanged(t *testing.T) {
	c := startClusterWith(t, testenv.Options{APIServerArgs: []string{"--runtime-config=resource.k8s.io/v1=false"}})
	if _, err := c.kube.Discovery().ServerResourcesForGroupVersion(resourcev1.SchemeGroupVersion.String()); !apierrors.IsNotFound(err) {
		t.Fatalf("discovery of %s = %v; want NotFound with the group version turned off", resourcev1.SchemeGroupVersion, err)
	}
	c.loadHomeLab(t)

	// The binary, so that its whole log is seen, client-go's own lines included.
	out := &testenv.Buffer{}
	cmd := exec.Command(operatorBinary, "--kubeconfig="+c.env.KubeconfigPath(), "--namespace="+operatorNamespace,
		"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("operator output:\n%s", out.String())
		}
	})

	gi := c.waitTotals(t, "cluster", totals{Nodes: 4, ReadyNodes: 0, Gpus: 1, ReadyGpus: 0})
	if diff := cmp.Diff(homeLabReport, inventory.ReportFields(gi.Status.Nodes)); diff != "" {
		t.Errorf("status.nodes (-first version's report +got):\n%s", diff)
	}
	// The other controllers have synced too before the log is judged.
	eventually(t, 20*time.Second, "ConfigMap gpu-node-status holds the four GPU nodes", func() error {
		cm, err := c.kube.CoreV1().ConfigMaps(operatorNamespace).Get(context.Background(), homelabv1.NodeStatusConfigMapName, metav1.GetOptions{})
		if err == nil && len(cm.Data) != len(homeLabReport) {
			return fmt.Errorf("%d keys", len(cm.Data))
		}
		return err
	})
	c.waitRecord(t, "nuc1", func(spec homelabv1.GpuNodeSpec) error {
		if spec.GpuCount != 1 {
			return fmt.Errorf("gpuCount %d, want 1", spec.GpuCount)
		}
		return nil
	})
	for _, line := range out.Lines() {
		if klogErrorLine.MatchString(line) && (strings.Contains(line, "resourceslices") || strings.Contains(line, "resource.k8s.io")) {
			t.Errorf("operator logged an error about ResourceSlices: %s", line)
		}
	}
}
