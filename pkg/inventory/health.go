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

	corev1 "k8s.io/api/core/v1"
)

// The health monitors' words in status.nodes[].conditions and on a GpuNode record: a short,
// fixed vocabulary whatever names the monitors use.
const (
	NodeGPUFallenOff        = "GPUFallenOff"
	NodeXIDError            = "XIDError"
	NodeSXIDError           = "SXIDError" // NVSwitch errors
	NodeGPUMemoryError      = "GPUMemoryError"
	NodeGPUThermal          = "GPUThermal"
	NodeGPUPCIeError        = "GPUPCIeError"
	NodeNVLinkError         = "NVLinkError"
	NodeGPUHealthWarning    = "GPUHealthWarning" // any other GPU health condition of NVSentinel's
	NodeQuarantined         = "Quarantined"      // NVSentinel took the node out of service
	NodeDriverUpgrading     = "DriverUpgrading"
	NodeDriverUpgradeFailed = "DriverUpgradeFailed"
)

// Labels the health monitors write. NVSentinel's state label is present only while its
// fault-quarantine, node-drainer and fault-remediation modules hold the node (quarantined,
// draining, drain-succeeded, drain-failed, remediating, remediation-succeeded,
// remediation-failed; NVIDIA/NVSentinel commons/pkg/statemanager). The GPU Operator's driver
// upgrade controller walks upgrade-required ... uncordon-required to upgrade-done, or ends
// in upgrade-failed (NVIDIA/k8s-operator-libs pkg/upgrade/consts.go).
const (
	LabelNVSentinelState    = "dgxc.nvidia.com/nvsentinel-state"
	LabelDriverUpgradeState = "nvidia.com/gpu-driver-upgrade-state"

	driverUpgradeDone   = "upgrade-done"
	driverUpgradeFailed = "upgrade-failed"
)

// healthConditions maps NVSentinel's node condition types to the vocabulary. NVSentinel's
// platform connector sets a condition True for a fatal health event (one that calls for
// quarantine or remediation) and False when the check passes again; non-fatal events become
// Kubernetes Events, not conditions (NVIDIA/NVSentinel docs/INTEGRATIONS.md, "Condition vs
// Event Behavior", "Standard Condition Types").
var healthConditions = map[corev1.NodeConditionType]string{
	// Syslog health monitor.
	"SysLogsGPUFallenOff": NodeGPUFallenOff,
	"SysLogsXIDError":     NodeXIDError,
	"SysLogsSXIDError":    NodeSXIDError,
	// GPU health monitor: DCGM's health watches, named Gpu<Watch>Watch.
	"GpuXidError":     NodeXIDError,
	"GpuMemWatch":     NodeGPUMemoryError,
	"GpuMemoryError":  NodeGPUMemoryError,
	"GpuThermalWatch": NodeGPUThermal,
	"GpuPcieWatch":    NodeGPUPCIeError,
	"GpuNvlinkWatch":  NodeNVLinkError,
	"NVLinkDown":      NodeNVLinkError,
	// NVSwitch: the NVLink fabric between the node's GPUs.
	"NVSwitchFatalError":    NodeNVLinkError,
	"NVSwitchDown":          NodeNVLinkError,
	"NVSwitchNonFatalError": NodeGPUHealthWarning,
	// A driver that stops answering DCGM's calls.
	"GpuDriverUnresponsive": NodeGPUHealthWarning,
}

// gpuFaults are the conditions that mean at least one GPU is unusable: the GPU left the bus,
// the driver reported a fatal XID, memory or PCIe failed (NVSentinel recommends a reset,
// reboot or replacement for each), the NVLink fabric is down (NVLink, NVSwitch or a fatal
// SXID: multi-GPU work on the node fails), or NVSentinel holds the node out of service.
// Thermal and the other DCGM watches slow a GPU or warn of trouble; the GPU still runs, so
// they are not counted. A driver upgrade is the operator's own doing, not a GPU fault.
var gpuFaults = []string{NodeGPUFallenOff, NodeXIDError, NodeSXIDError, NodeGPUMemoryError, NodeGPUPCIeError, NodeNVLinkError, NodeQuarantined}

// maxHealthConditions bounds Health.Conditions (the vocabulary has fewer words).
const maxHealthConditions = 16

// Health is what GPU health monitors say of a node.
type Health struct {
	Conditions []string // fixed vocabulary, sorted, distinct
	GPUFault   bool     // a condition that means at least one GPU is unusable
}

// IsHealthCondition reports whether ReadHealth reads node conditions of type t: NVSentinel's
// named ones and any DCGM health watch (Gpu<Name>Watch, as NVSentinel names each DCGM watch).
func IsHealthCondition(t corev1.NodeConditionType) bool {
	if _, ok := healthConditions[t]; ok {
		return true
	}
	return isDCGMWatch(string(t))
}

// isDCGMWatch: GpuPowerWatch, GpuInforomWatch, GpuSmWatch, ... and watches DCGM adds later.
func isDCGMWatch(t string) bool {
	name, ok := strings.CutPrefix(t, "Gpu")
	if !ok {
		return false
	}
	name, ok = strings.CutSuffix(name, "Watch")
	return ok && name != "" && name[0] >= 'A' && name[0] <= 'Z'
}

// IsHealthLabel reports whether ReadHealth reads label key.
func IsHealthLabel(key string) bool {
	return key == LabelNVSentinelState || key == LabelDriverUpgradeState
}

// ReadHealth reads the health monitors' node conditions (only those that are True: False is
// healthy, Unknown says nothing) and labels.
func ReadHealth(node *corev1.Node) Health {
	var conditions []string
	for _, c := range node.Status.Conditions {
		if c.Status != corev1.ConditionTrue || !IsHealthCondition(c.Type) {
			continue
		}
		word, ok := healthConditions[c.Type]
		if !ok {
			word = NodeGPUHealthWarning // another DCGM watch
		}
		conditions = append(conditions, word)
	}
	if state := node.Labels[LabelNVSentinelState]; state != "" {
		conditions = append(conditions, NodeQuarantined) // every state holds the node cordoned
	}
	switch state := node.Labels[LabelDriverUpgradeState]; state {
	case "", driverUpgradeDone:
	case driverUpgradeFailed:
		conditions = append(conditions, NodeDriverUpgradeFailed)
	default:
		conditions = append(conditions, NodeDriverUpgrading)
	}
	if len(conditions) == 0 {
		return Health{}
	}
	slices.Sort(conditions)
	conditions = slices.Compact(conditions)
	if len(conditions) > maxHealthConditions {
		conditions = conditions[:maxHealthConditions]
	}
	h := Health{Conditions: slices.Clip(conditions)}
	for _, c := range conditions {
		if slices.Contains(gpuFaults, c) {
			h.GPUFault = true
		}
	}
	return h
}
