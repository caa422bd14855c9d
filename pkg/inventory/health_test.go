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
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// healthNode is a GPU node with the kubelet's conditions, NVSentinel's conditions as its
// platform connector writes them, and labels.
func healthNode(labels map[string]string, conditions ...corev1.NodeCondition) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-01", Labels: labels}}
	n.Status.Conditions = append([]corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue, Reason: "KubeletHasDiskPressure"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
	}, conditions...)
	return n
}

func fault(t corev1.NodeConditionType, message string) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: corev1.ConditionTrue, Reason: string(t) + "IsNotHealthy", Message: message}
}

func healthy(t corev1.NodeConditionType) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: string(t) + "IsHealthy", Message: "No Health Failures"}
}

// What the monitors' real conditions and labels show on a node, and which mean a GPU is
// unusable.
func TestReadHealth(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		want Health
	}{{
		name: "healthy node: NVSentinel's checks passed, kubelet conditions are not GPU health",
		node: healthNode(nil, healthy("GpuMemWatch"), healthy("GpuThermalWatch"), healthy("SysLogsXIDError")),
		want: Health{},
	}, {
		name: "fatal XID from the syslog monitor",
		node: healthNode(nil, fault("SysLogsXIDError", "ErrorCode:79 PCI:0000:1b:00 GPU has fallen off the bus. Recommended Action=RESTART_BM;")),
		want: Health{Conditions: []string{NodeXIDError}, GPUFault: true},
	}, {
		name: "GPU fell off the bus",
		node: healthNode(nil, fault("SysLogsGPUFallenOff", "GPU 0000:1b:00.0 has fallen off the bus")),
		want: Health{Conditions: []string{NodeGPUFallenOff}, GPUFault: true},
	}, {
		name: "NVSwitch SXID",
		node: healthNode(nil, fault("SysLogsSXIDError", "ErrorCode:20034 NVSwitch SXID")),
		want: Health{Conditions: []string{NodeSXIDError}, GPUFault: true},
	}, {
		name: "DCGM memory, PCIe and NVLink watches",
		node: healthNode(nil, fault("GpuMemWatch", "[DCGM_FR_VOLATILE_DBE_DETECTED] double-bit ECC"),
			fault("GpuPcieWatch", "DCGM_FR_PCI_REPLAY_RATE: 0"), fault("GpuNvlinkWatch", "DCGM_FR_NVLINK_DOWN")),
		want: Health{Conditions: []string{NodeGPUMemoryError, NodeGPUPCIeError, NodeNVLinkError}, GPUFault: true},
	}, {
		name: "thermal alone: the GPU is slowed, not unusable",
		node: healthNode(nil, fault("GpuThermalWatch", "[DCGM_FR_CLOCK_THROTTLE_THERMAL] GPU thermal throttling detected")),
		want: Health{Conditions: []string{NodeGPUThermal}},
	}, {
		name: "other DCGM watches are one warning",
		node: healthNode(nil, fault("GpuPowerWatch", "power"), fault("GpuInforomWatch", "inforom"), fault("GpuSmWatch", "sm")),
		want: Health{Conditions: []string{NodeGPUHealthWarning}},
	}, {
		name: "NVSwitch fatal error is an NVLink fabric fault",
		node: healthNode(nil, fault("NVSwitchFatalError", "[DCGM_FR_NVSWITCH_FATAL_ERROR]")),
		want: Health{Conditions: []string{NodeNVLinkError}, GPUFault: true},
	}, {
		name: "the same word from two monitors is said once",
		node: healthNode(nil, fault("SysLogsXIDError", "79"), fault("GpuXidError", "79")),
		want: Health{Conditions: []string{NodeXIDError}, GPUFault: true},
	}, {
		name: "Unknown says nothing",
		node: healthNode(nil, corev1.NodeCondition{Type: "GpuMemWatch", Status: corev1.ConditionUnknown}),
		want: Health{},
	}, {
		name: "other monitors' conditions are not read",
		node: healthNode(nil, fault("KernelDeadlock", "task hung"), fault("CSPMaintenance", "scheduled"), fault("DCGMError", "dcgm down"),
			fault("GpuWatch", "not a DCGM watch name"), fault("Gpuwatch", "lower case")),
		want: Health{},
	}, {
		name: "NVSentinel quarantined the node",
		node: healthNode(map[string]string{LabelNVSentinelState: "quarantined"}, fault("SysLogsXIDError", "79")),
		want: Health{Conditions: []string{NodeQuarantined, NodeXIDError}, GPUFault: true},
	}, {
		name: "NVSentinel draining after a thermal fault",
		node: healthNode(map[string]string{LabelNVSentinelState: "draining"}, fault("GpuThermalWatch", "hot")),
		want: Health{Conditions: []string{NodeGPUThermal, NodeQuarantined}, GPUFault: true},
	}, {
		name: "NVSentinel's terminal failure still holds the node",
		node: healthNode(map[string]string{LabelNVSentinelState: "remediation-failed"}),
		want: Health{Conditions: []string{NodeQuarantined}, GPUFault: true},
	}, {
		name: "driver upgrade in progress",
		node: healthNode(map[string]string{LabelDriverUpgradeState: "drain-required"}),
		want: Health{Conditions: []string{NodeDriverUpgrading}},
	}, {
		name: "driver upgrade failed",
		node: healthNode(map[string]string{LabelDriverUpgradeState: "upgrade-failed"}),
		want: Health{Conditions: []string{NodeDriverUpgradeFailed}},
	}, {
		name: "driver upgrade done",
		node: healthNode(map[string]string{LabelDriverUpgradeState: "upgrade-done", LabelNVSentinelState: ""}),
		want: Health{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ReadHealth(tt.node)); diff != "" {
				t.Errorf("health (-want +got):\n%s", diff)
			}
		})
	}
}

// Every state of the GPU Operator's driver upgrade between required and done is an upgrade
// in progress.
func TestReadHealthDriverUpgradeStates(t *testing.T) {
	for _, state := range []string{"upgrade-required", "cordon-required", "wait-for-jobs-required", "pod-deletion-required",
		"drain-required", "node-maintenance-required", "post-maintenance-required", "pod-restart-required",
		"validation-required", "uncordon-required"} {
		got := ReadHealth(healthNode(map[string]string{LabelDriverUpgradeState: state}))
		if diff := cmp.Diff(Health{Conditions: []string{NodeDriverUpgrading}}, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", state, diff)
		}
	}
}

// A node with every condition a monitor could write still says each word once, sorted, and
// within the bound.
func TestReadHealthIsBounded(t *testing.T) {
	var conditions []corev1.NodeCondition
	for t := range healthConditions {
		conditions = append(conditions, fault(t, "x"))
	}
	for i := range 500 {
		conditions = append(conditions, fault(corev1.NodeConditionType(fmt.Sprintf("GpuNew%dWatch", i)), "x"))
	}
	h := ReadHealth(healthNode(map[string]string{LabelNVSentinelState: "remediating", LabelDriverUpgradeState: "upgrade-failed"}, conditions...))
	want := []string{NodeDriverUpgradeFailed, NodeGPUFallenOff, NodeGPUHealthWarning, NodeGPUMemoryError, NodeGPUPCIeError,
		NodeGPUThermal, NodeNVLinkError, NodeQuarantined, NodeSXIDError, NodeXIDError}
	if diff := cmp.Diff(want, h.Conditions); diff != "" || !h.GPUFault {
		t.Errorf("conditions (-want +got):\n%s; fault %v", diff, h.GPUFault)
	}
	if len(h.Conditions) > maxHealthConditions {
		t.Errorf("%d conditions; want at most %d", len(h.Conditions), maxHealthConditions)
	}
}

// IsHealthCondition and IsHealthLabel name all that ReadHealth reads: a node keeping only
// those reads the same.
func TestHealthReadsOnlyWhatItNames(t *testing.T) {
	node := healthNode(map[string]string{LabelNVSentinelState: "quarantined", LabelDriverUpgradeState: "validation-required",
		"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "k8s.nvidia.com/cordon-by": "NVSentinel"},
		fault("SysLogsXIDError", "79"), fault("GpuThermalWatch", "hot"), healthy("GpuPcieWatch"), fault("GpuSmWatch", "sm"))
	kept := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
	for k, v := range node.Labels {
		if IsHealthLabel(k) {
			kept.Labels[k] = v
		}
	}
	for _, c := range node.Status.Conditions {
		if IsHealthCondition(c.Type) {
			kept.Status.Conditions = append(kept.Status.Conditions, corev1.NodeCondition{Type: c.Type, Status: c.Status})
		}
	}
	if diff := cmp.Diff(ReadHealth(node), ReadHealth(kept)); diff != "" {
		t.Errorf("health from the kept conditions and labels differs (-all +kept):\n%s", diff)
	}
	for _, t2 := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, "KernelDeadlock", "CSPMaintenance"} {
		if IsHealthCondition(t2) {
			t.Errorf("IsHealthCondition(%s) = true", t2)
		}
	}
}
