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

package inventory

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/fixtures/dra"
)

// draNode is a node as the GPU Operator leaves it in DRA mode: no GFD labels, no capacity.
func draNode(name string) *corev1.Node {
	return node(name, corev1.ConditionTrue, map[string]string{
		"nvidia.com/gpu.deploy.dra-driver": "true", LabelGPUPresent: "true",
	})
}

// devicesOf returns a Devices lookup that answers facts for the named node.
func devicesOf(facts map[string]*DeviceFacts) Devices {
	return func(name string) *DeviceFacts { return facts[name] }
}

func TestDRANodeCountsItsDevicesUnderTheGFDModel(t *testing.T) {
	h100 := DeviceFactsOf(draSlices(t, dra.H100))
	labelled := gfdNode("gfd-1", map[string]string{LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "8", LabelMemory: "81559"}, gpus(8), gpus(8))
	cache := NewEntryCacheWithDevices(devicesOf(map[string]*DeviceFacts{"dra-1": h100}))
	inv, _ := cache.Compute([]*corev1.Node{labelled, draNode("dra-1")}, nil, t0)

	got := inv.Nodes[0]
	if got.Name != "dra-1" || got.GpuCount != 8 || got.Product != "NVIDIA-H100-80GB-HBM3" || got.Source != homelabv1.SourceDRA {
		t.Errorf("DRA node = %+v, want 8 NVIDIA-H100-80GB-HBM3 from dra", got)
	}
	if got.LabelsMissing || slices.Contains(got.Conditions, NodeLabelsMissing) {
		t.Errorf("a DRA node without GFD labels is reported as missing labels: %v", got.Conditions)
	}
	if len(inv.Models) != 1 || inv.Models[0].Gpus != 16 || inv.Models[0].Nodes != 2 {
		t.Errorf("models = %+v, want one H100 model of 2 nodes and 16 GPUs", inv.Models)
	}
	if inv.Nodes[1].Source != "" {
		t.Errorf("GFD node's source = %q, want empty (GFD alone)", inv.Nodes[1].Source)
	}
}

func TestLabelsAndSlicesThatDisagreeSayWhichSaidWhat(t *testing.T) {
	h100 := DeviceFactsOf(draSlices(t, dra.H100))
	n := gfdNode("both", map[string]string{LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "4", LabelMemory: "81559"}, nil, nil)
	entry, warnings := EntryFrom(n, h100)
	if entry.GpuCount != 8 || entry.Source != "gpu-feature-discovery,dra" {
		t.Errorf("entry = %d GPUs from %q, want 8 from gpu-feature-discovery,dra", entry.GpuCount, entry.Source)
	}
	if len(warnings) != 1 || warnings[0].Label != LabelCount || warnings[0].Value != "4" {
		t.Fatalf("warnings = %v, want one about %s=4", warnings, LabelCount)
	}
	if want := `nvidia.com/gpu.count="4": the gpu.nvidia.com ResourceSlices publish 8 GPUs; using the slices`; !slices.Contains(entry.Warnings, want) {
		t.Errorf("entry warnings = %q, want %q", entry.Warnings, want)
	}
	// GFD's zero-padded driver revision is the same version as the driver's semantic one.
	agreeing := gfdNode("same", map[string]string{LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "8", LabelMemory: "81559",
		LabelDriverFull: h100.DriverVersion}, gpus(8), gpus(8))
	if _, w := EntryFrom(agreeing, h100); len(w) != 0 {
		t.Errorf("labels that agree with the slices warn: %v", w)
	}
	if !sameVersion("570.124.06", "570.124.6") || sameVersion("570.124.06", "570.124.7") {
		t.Error("sameVersion does not compare numerically")
	}
}

func TestTaintedDevicesAndPendingPools(t *testing.T) {
	tainted := DeviceFactsOf(draSlices(t, dra.H100Tainted))
	entry, _ := EntryFrom(draNode("t"), tainted)
	if entry.UnhealthyGpus != tainted.UnhealthyGpus || entry.UnhealthyGpus == 0 {
		t.Errorf("unhealthy = %d, want the NoSchedule-tainted GPUs (%d)", entry.UnhealthyGpus, tainted.UnhealthyGpus)
	}
	for _, c := range []string{NodeUnhealthyGPUs, NodeDeviceTainted} {
		if !slices.Contains(entry.Conditions, c) {
			t.Errorf("conditions %v lack %s", entry.Conditions, c)
		}
	}
	inv, _ := NewEntryCacheWithDevices(devicesOf(map[string]*DeviceFacts{"t": tainted})).Compute([]*corev1.Node{draNode("t")}, nil, t0)
	if d := DegradedCondition(inv, 1); d.Status != metav1.ConditionTrue || d.Reason != homelabv1.ReasonGPUsUnhealthy {
		t.Errorf("Degraded = %s/%s, want True/%s", d.Status, d.Reason, homelabv1.ReasonGPUsUnhealthy)
	}

	// A pool mid-update, with a record: the record's facts are carried, the wait named.
	pending := DeviceFactsOf(draSlices(t, dra.PoolMidUpdate))
	if !pending.Pending {
		t.Fatal("fixture PoolMidUpdate is not pending")
	}
	record := &homelabv1.GpuNodeSpec{Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 8, Source: homelabv1.SourceDRA}
	cache := NewEntryCacheWithDevices(devicesOf(map[string]*DeviceFacts{"p": pending}))
	inv, _ = cache.ComputeWithRecords([]*corev1.Node{draNode("p")}, nil, func(string) *homelabv1.GpuNodeSpec { return record }, t0)
	got := inv.Nodes[0]
	if got.GpuCount != 8 || got.Source != homelabv1.SourceDRA || !slices.Contains(got.Conditions, NodeDevicesPending) {
		t.Errorf("pending pool entry = %+v, want the record's 8 GPUs from dra and DevicesPending", got)
	}
}

// A node's facts are replaced when its slices change: the cached entry follows without a
// change of the Node.
func TestEntryCacheFollowsNewFacts(t *testing.T) {
	facts := map[string]*DeviceFacts{"d": DeviceFactsOf(draSlices(t, dra.H100))}
	cache := NewEntryCacheWithDevices(devicesOf(facts))
	n := draNode("d")
	n.ResourceVersion = "7"
	first, _ := cache.Compute([]*corev1.Node{n}, nil, t0)
	facts["d"] = DeviceFactsOf(draSlices(t, dra.H100Tainted))
	second, _ := cache.Compute([]*corev1.Node{n}, nil, t0)
	if first.Hash == second.Hash || second.UnhealthyGpus == 0 {
		t.Errorf("new facts for an unchanged node did not change the inventory (unhealthy %d)", second.UnhealthyGpus)
	}
	spec, ok := cache.NodeIdentity(n)
	if !ok || len(spec.Devices) != len(facts["d"].Devices) || spec.Source != homelabv1.SourceDRA {
		t.Errorf("NodeIdentity = %v, %d devices from %q; want the slices' %d devices from dra", ok, len(spec.Devices), spec.Source, len(facts["d"].Devices))
	}
}

func TestManagedCloudAndBareDevicePluginNodesCountTheirGPUs(t *testing.T) {
	gke := node("gke-1", corev1.ConditionTrue, map[string]string{
		LabelGKEAccelerator: "nvidia-tesla-t4", LabelGKESharingStrategy: "time-sharing", LabelGKEMaxSharedClients: "4",
	})
	gke.Status.Capacity = corev1.ResourceList{ResourceGPU: *resource.NewQuantity(8, resource.DecimalSI)}
	eks := node("eks-1", corev1.ConditionTrue, map[string]string{LabelAWSAccelerator: "nvidia-tesla-v100"})
	eks.Status.Capacity = corev1.ResourceList{ResourceGPU: *resource.NewQuantity(4, resource.DecimalSI)}
	bare := node("bare-1", corev1.ConditionTrue, nil)
	bare.Status.Capacity = corev1.ResourceList{ResourceGPU: *resource.NewQuantity(2, resource.DecimalSI)}
	inv, _ := Compute([]*corev1.Node{gke, eks, bare}, nil, t0)

	want := map[string]struct {
		gpus    int32
		product string
		source  string
	}{
		"gke-1":  {2, "Tesla-T4", homelabv1.SourceGKE}, // 8 time-shared slots of 4 clients each
		"eks-1":  {4, ProductFromAccelerator("nvidia-tesla-v100"), homelabv1.SourceAcceleratorLabel},
		"bare-1": {2, "", homelabv1.SourceDevicePlugin},
	}
	for _, n := range inv.Nodes {
		w := want[n.Name]
		if n.GpuCount != w.gpus || n.Product != w.product || n.Source != w.source || n.LabelsMissing {
			t.Errorf("%s = %d GPUs %q from %q (labels missing %v); want %d %q from %q", n.Name, n.GpuCount, n.Product, n.Source, n.LabelsMissing, w.gpus, w.product, w.source)
		}
	}
	if inv.TotalGpus != 8 {
		t.Errorf("total GPUs = %d, want 8", inv.TotalGpus)
	}
}

// GFD's labels vanish but the capacity stays (the seed's failure): the node is reported from
// what was known, not shrunk to what the capacity says.
func TestCapacityDoesNotHideVanishedLabels(t *testing.T) {
	labelled := gfdNode("g", map[string]string{LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "8", LabelMemory: "81559"}, gpus(8), gpus(8))
	first, _ := Compute([]*corev1.Node{labelled}, nil, t0)
	vanished := labelled.DeepCopy()
	for _, k := range gfdLabels {
		delete(vanished.Labels, k)
	}
	second, _ := Compute([]*corev1.Node{vanished}, first.Nodes, t0.Add(time.Minute))
	if n := second.Nodes[0]; !n.LabelsMissing || n.Product != "NVIDIA-H100-80GB-HBM3" || n.Source != "" {
		t.Errorf("entry = %+v, want the last-known H100 marked missing", n)
	}
	// A bare device-plugin node's record is no memory to carry: its capacity is still there.
	record := &homelabv1.GpuNodeSpec{GpuCount: 8, Source: homelabv1.SourceDevicePlugin}
	inv, _ := (*EntryCache)(nil).ComputeWithRecords([]*corev1.Node{vanished}, nil, func(string) *homelabv1.GpuNodeSpec { return record }, t0)
	if n := inv.Nodes[0]; n.LabelsMissing || n.Source != homelabv1.SourceDevicePlugin {
		t.Errorf("entry = %+v, want the capacity's count, not missing", n)
	}
}

func TestHealthMonitorsShowPerNodeAndDegrade(t *testing.T) {
	xid := gfdNode("xid", map[string]string{LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "8"}, gpus(8), gpus(8))
	xid.Status.Conditions = append(xid.Status.Conditions, corev1.NodeCondition{Type: "SysLogsXIDError", Status: corev1.ConditionTrue})
	upgrade := gfdNode("upg", map[string]string{LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "8", LabelDriverUpgradeState: "upgrade-failed"}, gpus(8), gpus(8))
	inv, _ := Compute([]*corev1.Node{xid, upgrade}, nil, t0)
	byName := map[string]homelabv1.GpuNodeEntry{}
	for _, n := range inv.Nodes {
		byName[n.Name] = n
	}
	if n := byName["xid"]; n.UnhealthyGpus != 1 || !slices.Contains(n.Conditions, NodeXIDError) {
		t.Errorf("XID node = %d unhealthy, conditions %v; want 1 and XIDError", n.UnhealthyGpus, n.Conditions)
	}
	if n := byName["upg"]; n.UnhealthyGpus != 0 || !slices.Contains(n.Conditions, NodeDriverUpgradeFailed) {
		t.Errorf("upgrade node = %d unhealthy, conditions %v; want 0 and DriverUpgradeFailed", n.UnhealthyGpus, n.Conditions)
	}
	d := DegradedCondition(inv, 1)
	if d.Status != metav1.ConditionTrue || d.Message != "1 GPUs are unhealthy on xid; the GPU driver upgrade failed on upg" {
		t.Errorf("Degraded = %s %q", d.Status, d.Message)
	}
	spec := Identity(&inv.Nodes[1])
	if !slices.Contains(spec.Conditions, NodeXIDError) || slices.Contains(spec.Conditions, NodeNotReady) {
		t.Errorf("record conditions = %v, want the health conditions only", spec.Conditions)
	}
}

func TestCliquesCountNodesAndGPUsBounded(t *testing.T) {
	var entries []homelabv1.GpuNodeEntry
	for i := range 40 {
		for j := 0; j <= i%3; j++ {
			entries = append(entries, homelabv1.GpuNodeEntry{Name: "n", Clique: "uuid." + string(rune('A'+i)), GpuCount: 4, Ready: j == 0})
		}
	}
	entries = append(entries, homelabv1.GpuNodeEntry{Name: "loner", GpuCount: 8, Ready: true})
	got := Cliques(entries)
	if len(got) != MaxCliques || got[len(got)-1].Name != OtherCliques {
		t.Fatalf("%d cliques, last %q; want %d ending in %q", len(got), got[len(got)-1].Name, MaxCliques, OtherCliques)
	}
	var nodes, gpus int32
	for _, c := range got {
		nodes += c.Nodes
		gpus += c.Gpus
	}
	if int(nodes) != len(entries)-1 || gpus != 4*nodes {
		t.Errorf("cliques count %d nodes and %d GPUs; want %d and %d", nodes, gpus, len(entries)-1, 4*(len(entries)-1))
	}
	if got[0].Gpus != 12 || got[0].ReadyGpus != 4 {
		t.Errorf("largest clique = %+v, want 12 GPUs of which 4 ready", got[0])
	}
	if Cliques([]homelabv1.GpuNodeEntry{{Name: "x", GpuCount: 1}}) != nil {
		t.Error("cliques without any clique label are not nil")
	}
}

func TestSlicesClaimingThousandsOfGPUsCountAsAPhysicalNode(t *testing.T) {
	entry, _ := EntryFrom(draNode("big"), &DeviceFacts{Product: "NVIDIA-H100-80GB-HBM3", GpuCount: 5000})
	if entry.GpuCount != MaxGpusPerNode || len(entry.Warnings) != 1 {
		t.Errorf("entry = %d GPUs, warnings %q; want %d and one warning", entry.GpuCount, entry.Warnings, MaxGpusPerNode)
	}
}

// Facts kept without their device list (the slice cache's) get it listed for the record.
func TestNodeIdentityListsDevicesOnDemand(t *testing.T) {
	full := DeviceFactsOf(draSlices(t, dra.H100))
	kept := *full
	kept.Devices = nil
	cache := NewEntryCacheWithDevices(devicesOf(map[string]*DeviceFacts{"d": &kept})).
		WithDeviceList(func(string) []homelabv1.GpuDevice { return full.Devices })
	spec, ok := cache.NodeIdentity(draNode("d"))
	if !ok || !slices.EqualFunc(spec.Devices, full.Devices, func(a, b homelabv1.GpuDevice) bool { return a.UUID == b.UUID }) {
		t.Errorf("NodeIdentity devices = %v, want the listed ones", spec.Devices)
	}
}

// A stored entry edited to name another source does not carry that word into the status.
func TestCarriedSourceIsOneOfTheSources(t *testing.T) {
	vanished := node("g", corev1.ConditionTrue, map[string]string{LabelGPUPresent: "true"})
	for stored, want := range map[string]string{
		"dra": "dra", "gpu-feature-discovery,dra": "gpu-feature-discovery,dra",
		"<script>": "", strings.Repeat("x", 4096): "", "dra,": "",
	} {
		prev := []homelabv1.GpuNodeEntry{{Name: "g", Product: "NVIDIA-L4", GpuCount: 1, Source: stored}}
		inv, _ := Compute([]*corev1.Node{vanished}, prev, t0)
		if got := inv.Nodes[0].Source; got != want {
			t.Errorf("stored source %.20q carried as %q, want %q", stored, got, want)
		}
	}
}
