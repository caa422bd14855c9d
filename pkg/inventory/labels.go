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

// Package inventory turns Nodes into a GPU inventory: which nodes are GPU nodes, what each
// carries, the totals, a per-model summary, a deterministic hash, the conditions and the
// events worth telling a human. It is pure: no API calls, no clock (the caller passes the
// time), no goroutines, so everything here is tested with plain values.
package inventory

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Labels written by NVIDIA GPU Feature Discovery (now part of NVIDIA/k8s-device-plugin), the
// GPU Operator, and Node Feature Discovery for NVIDIA's PCI vendor ID (10de).
const (
	LabelGPUPresent     = "nvidia.com/gpu.present"
	LabelGPUPrefix      = "nvidia.com/gpu."
	LabelProduct        = "nvidia.com/gpu.product"
	LabelCount          = "nvidia.com/gpu.count"
	LabelMemory         = "nvidia.com/gpu.memory"
	LabelWorkloadConfig = "nvidia.com/gpu.workload.config"
	LabelFamily         = "nvidia.com/gpu.family"
	LabelComputeMajor   = "nvidia.com/gpu.compute.major"
	LabelComputeMinor   = "nvidia.com/gpu.compute.minor"
	LabelReplicas       = "nvidia.com/gpu.replicas"
	LabelSharing        = "nvidia.com/gpu.sharing-strategy"
	LabelClique         = "nvidia.com/gpu.clique" // multi-node NVLink domain: <cluster UUID>.<clique ID>

	LabelDriverFull   = "nvidia.com/cuda.driver-version.full"
	LabelDriverMajor  = "nvidia.com/cuda.driver-version.major"
	LabelDriverMinor  = "nvidia.com/cuda.driver-version.minor"
	LabelDriverRev    = "nvidia.com/cuda.driver-version.revision"
	LabelRuntimeFull  = "nvidia.com/cuda.runtime-version.full"
	LabelRuntimeMajor = "nvidia.com/cuda.runtime-version.major"
	LabelRuntimeMinor = "nvidia.com/cuda.runtime-version.minor"
	// Deprecated forms that older GFD releases wrote.
	LabelOldDriverMajor  = "nvidia.com/cuda.driver.major"
	LabelOldDriverMinor  = "nvidia.com/cuda.driver.minor"
	LabelOldDriverRev    = "nvidia.com/cuda.driver.rev"
	LabelOldRuntimeMajor = "nvidia.com/cuda.runtime.major"
	LabelOldRuntimeMinor = "nvidia.com/cuda.runtime.minor"

	LabelMIGCapable    = "nvidia.com/mig.capable"
	LabelMIGStrategy   = "nvidia.com/mig.strategy"
	LabelMIGConfig     = "nvidia.com/mig.config"
	LabelMIGState      = "nvidia.com/mig.config.state"
	labelMIGProfilePfx = "nvidia.com/mig-" // nvidia.com/mig-<profile>.count, .memory, ...

	// ResourceGPU is the extended resource the NVIDIA device plugin advertises;
	// ResourceGPUShared is its name when sharing is configured with renameByDefault.
	ResourceGPU       corev1.ResourceName = "nvidia.com/gpu"
	ResourceGPUShared corev1.ResourceName = "nvidia.com/gpu.shared"

	// TaintUnreachable is set by the node lifecycle controller when the kubelet stops reporting.
	TaintUnreachable = "node.kubernetes.io/unreachable"
)

// Node condition reasons in GpuNodeEntry.Conditions.
const (
	NodeNotReady        = "NotReady"
	NodeUnreachable     = "Unreachable"
	NodeLabelsMissing   = "LabelsMissing"
	NodeUnhealthyGPUs   = "UnhealthyGPUs"
	NodeMIGConfigFailed = "MIGConfigFailed"
	NodeCordoned        = "Cordoned"
	NodeDevicesPending  = "DevicesPending" // the node's DRA pool is incomplete: its newest slices are still coming
	NodeDeviceTainted   = "DeviceTainted"  // a DRA device carries a taint
)

// nfdNVIDIAPCILabels mark a node on which Node Feature Discovery found an NVIDIA PCI device
// (any class, display controller, 3D controller).
var nfdNVIDIAPCILabels = []string{
	"feature.node.kubernetes.io/pci-10de.present",
	"feature.node.kubernetes.io/pci-0300_10de.present",
	"feature.node.kubernetes.io/pci-0302_10de.present",
}

// gfdLabels are the labels whose presence shows that GPU Feature Discovery labelled the node
// (as opposed to the GPU Operator's deploy labels, which survive GFD's absence).
var gfdLabels = []string{LabelProduct, LabelCount, LabelMemory}

// bytesThresholdMiB: no GPU has a tebibyte of memory, so an nvidia.com/gpu.memory value at or
// above this many "MiB" was written in bytes by an old GFD release.
const bytesThresholdMiB = 1 << 20

// ReadsLabel reports whether the inventory reads a label (or may read it: every
// nvidia.com/gpu.* key marks a GPU node). An informer may drop every other label without
// changing any entry.
func ReadsLabel(key string) bool {
	switch {
	case strings.HasPrefix(key, LabelGPUPrefix), strings.HasPrefix(key, "nvidia.com/cuda."):
		return true
	case key == LabelMIGCapable || key == LabelMIGStrategy || key == LabelMIGConfig || key == LabelMIGState:
		return true
	case strings.HasPrefix(key, labelMIGProfilePfx):
		return strings.HasSuffix(key, ".count") || strings.HasSuffix(key, ".memory")
	}
	if IsCloudGPULabel(key) || IsHealthLabel(key) {
		return true
	}
	return slices.Contains(nfdNVIDIAPCILabels, key)
}
