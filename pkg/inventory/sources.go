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
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// DRADriver is the name of NVIDIA's DRA driver, the only driver whose ResourceSlices are read.
const DRADriver = "gpu.nvidia.com"

// DeviceFacts is what a node's gpu.nvidia.com ResourceSlices say of its GPUs: the newest
// complete generation of the node's pool. A DeviceFacts is never modified once built: a
// change yields a new one, so a pointer comparison tells whether a node's facts changed.
type DeviceFacts struct {
	// Pending is true when no generation of the pool is complete yet (slices of the newest
	// generation are still missing); nothing else is set then.
	Pending bool

	Product           string // normalised to GFD's form (NormalizeProduct)
	GpuCount          int32  // physical GPUs: type=gpu (or vfio) devices, one per UUID/PCI bus ID
	GpuMemoryMiB      int64  // of one GPU
	Family            string // architecture, lower case like GFD's nvidia.com/gpu.family
	ComputeCapability string // major.minor
	DriverVersion     string
	CudaVersion       string // major.minor of cudaDriverVersion
	// MIG lists published MIG devices per profile (static MIG); nil when there are none.
	MIG []homelabv1.MigDevice
	// Devices are the published GPUs, MIG and passthrough devices, sorted by name, bounded.
	Devices []homelabv1.GpuDevice
	// UnhealthyGpus counts physical GPUs with a NoSchedule or NoExecute taint on the GPU or
	// on one of its MIG devices.
	UnhealthyGpus int32
	// Tainted is true when any device carries a taint (of any effect).
	Tainted bool
	// WholeGPUs has bit n set when gpu-n, a whole GPU (type gpu), is published (n < 64);
	// TaintedGPUs when that device itself carries a NoSchedule or NoExecute taint. A claim
	// can get a whole GPU that is published, untainted and of which nothing is allocated.
	WholeGPUs, TaintedGPUs uint64
	// Counters are the partitionable devices (DynamicMIG) and their counter sets; nil when
	// no device consumes counters.
	Counters *CounterFacts
	// Shareable are the devices that allow several allocations (consumable capacity),
	// sorted by name; nil when none.
	Shareable []ShareableDevice
	// Warnings say what could not be read (devices of several products, bad attributes).
	Warnings []string
}
