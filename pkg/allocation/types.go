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

// Package allocation computes which GPUs pods hold and which pods wait for GPUs, from the two
// ways a pod gets a GPU: device-plugin extended resources (nvidia.com/gpu, nvidia.com/gpu.shared,
// nvidia.com/mig-*) and DRA ResourceClaims allocated from the gpu.nvidia.com driver. It makes no
// API calls: the pod and claim caches feed it what they decoded.
package allocation

import (
	"crypto/sha256"
	"strings"
)

// GPU resources and the DRA driver whose devices count.
const (
	ResourceGPU       = "nvidia.com/gpu"
	ResourceGPUShared = "nvidia.com/gpu.shared"
	ResourceMIGPrefix = "nvidia.com/mig-"
	DRADriver         = "gpu.nvidia.com"
	// ProductLabel is the label a pod's node selector or affinity pins a model with.
	ProductLabel = "nvidia.com/gpu.product"
	// ExtendedResourceClaimAnnotation marks the claim the scheduler made for a pod's
	// extended-resource request served by DRA.
	ExtendedResourceClaimAnnotation = "resource.kubernetes.io/extended-resource-claim"
)

// IsGPUResource reports whether an extended resource name is one whose units are GPUs or
// parts of GPUs.
func IsGPUResource(name string) bool {
	return name == ResourceGPU || name == ResourceGPUShared || strings.HasPrefix(name, ResourceMIGPrefix) && len(name) > len(ResourceMIGPrefix)
}

// ResourceCount is an amount of one GPU resource.
type ResourceCount struct {
	Name  string
	Count int64
}

// Container is what the request arithmetic reads of one container: its GPU requests (the
// limit stands in for a missing request, as the API server's defaulting does) and, for an
// init container, whether it is a sidecar (restartPolicy Always).
type Container struct {
	Requests    []ResourceCount
	Restartable bool
}

// Pod is what the pod cache keeps of a pod that requests GPUs through the device plugin.
// Pods that do not are not kept at all.
//
// A cache keeps one per GPU pod, so it holds only what allocation reads (no resourceVersion)
// and its fields are ordered to fit the smallest allocation.
type Pod struct {
	Namespace, Name string
	// Node is spec.nodeName: empty while the pod waits to be scheduled.
	Node string
	// Model is the product the pod pins through spec.nodeSelector or a required node
	// affinity on ProductLabel (the label's value, as GPU Feature Discovery writes it);
	// empty when it pins none or several.
	Model string
	// Requests is the effective request, computed as the scheduler does (PodRequests),
	// GPU resources only, sorted by name. Never empty for a kept pod. Pods may share one
	// slice: it is never modified once the pod is built.
	Requests []ResourceCount
	// Created is metadata.creationTimestamp in Unix seconds.
	Created int64
	UID     UID
	// Finished: phase Succeeded or Failed; such a pod holds nothing.
	Finished bool
	// Deleting: metadata.deletionTimestamp is set. Bound, it keeps holding until it is gone
	// (the scheduler counts it); waiting, it is no demand (the scheduler will not place it).
	Deleting bool
	// Gated: spec.schedulingGates is not empty, so the scheduler does not try to place it
	// yet: its demand is queued, not pending.
	Gated bool
}

// UID is a pod's metadata.uid in 16 bytes: the UUID the API server assigns, as its bytes,
// and any other string (a test's, a fake server's) as a hash of it. Allocation only compares
// UIDs, to count a pod once whether it holds through the device plugin, a claim or both;
// a kept pod holds 16 bytes instead of a 36-character string. The zero UID is unknown.
type UID [16]byte

// UIDOf returns the UID of the string s; "" is the zero UID.
func UIDOf(s string) UID {
	var u UID
	if s == "" {
		return u
	}
	if uuid, ok := parseUUID(s); ok {
		return uuid
	}
	sum := sha256.Sum256([]byte(s))
	copy(u[:], sum[:])
	return u
}

// uuidDigits are where each byte's two hexadecimal digits start in a UUID's 36 characters.
var uuidDigits = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// parseUUID reads a UUID as the API server writes it (8-4-4-4-12 lowercase hexadecimal
// digits).
func parseUUID(s string) (UID, bool) {
	var u UID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	for j, i := range uuidDigits {
		hi, ok1 := lowerHex(s[i])
		lo, ok2 := lowerHex(s[i+1])
		if !ok1 || !ok2 {
			return u, false
		}
		u[j] = hi<<4 | lo
	}
	return u, true
}

// lowerHex is a lowercase hexadecimal digit's value: the API server writes UUIDs so, and an
// uppercase spelling, a different string, is hashed instead.
func lowerHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// Key is the pod's namespace/name.
func (p *Pod) Key() string { return p.Namespace + "/" + p.Name }

// Claim is what the claim cache keeps of a ResourceClaim that holds or asks for
// gpu.nvidia.com devices. Other claims are not kept.
type Claim struct {
	Namespace, Name, UID string
	ResourceVersion      string
	Created              int64 // Unix seconds
	// Devices are the allocation's results from DRADriver, sorted by pool then device.
	Devices []Device
	// Shares are the results that took a share of a device allowing several allocations
	// (consumable capacity), sorted by pool then device; also in Devices.
	Shares []Share
	// Holders are the pods in status.reservedFor.
	Holders []Holder
	// Requests are the device requests of an unallocated claim (empty once allocated).
	Requests []DeviceRequest
}

// Key is the claim's namespace/name.
func (c *Claim) Key() string { return c.Namespace + "/" + c.Name }

// Device is one allocated device: the NVIDIA driver's pool is named after the node.
type Device struct {
	Pool, Device string
}

// Holder is a pod a claim is reserved for.
type Holder struct {
	Name string
	UID  UID
}

// DeviceRequest is what one request of an unallocated claim asks for.
type DeviceRequest struct {
	// Class is the DeviceClass name (gpu.nvidia.com, mig.nvidia.com, ...).
	Class string
	// Count is the number of devices (1 unless allocationMode ExactCount says more; All
	// counts as 1).
	Count int64
	// Product is the productName a CEL selector requires, as the driver publishes it
	// (spaces, not GFD's dashes); empty when none.
	Product string
}

// Held is what pods hold on one node. A Tracker replaces a node's Held when it changes and
// never modifies one, so callers may keep and compare the pointer.
type Held struct {
	// Pods counts the distinct pods that hold GPUs here (claim holders included).
	Pods int32
	// Namespaces is what each namespace holds here, sorted by namespace.
	Namespaces []NamespaceHeld
	// Shares is what the shares of the node's devices that allow several allocations
	// consume, summed per device, sorted by device; nil when none.
	Shares []Share
}

// Share is what allocated shares consume of one device that allows several allocations.
type Share struct {
	Pool, Device string
	// Consumed is the capacity consumed, in thousandths (CapacityMilli), sorted by name.
	Consumed []ResourceCount
}

// NamespaceHeld is what one namespace's pods hold on one node.
type NamespaceHeld struct {
	Namespace string
	Pods      int32
	// Resources are the device-plugin resources held, summed over pods, sorted by name.
	Resources []ResourceCount
	// Devices are the DRA devices held (device names of the node's pool), sorted, unique.
	Devices []string
}

// Shape is what converting held resources into GPUs needs to know of a node.
type Shape struct {
	// GPUs is the node's physical GPU count; 0 when unknown (no cap applies).
	GPUs int32
	// Replicas is the number of pods that share one GPU (time-slicing or MPS); 0 or 1: none.
	Replicas int32
	// SingleMIGProfile is set with MIG's single strategy: each nvidia.com/gpu is a MIG
	// device of this profile (e.g. 1g.5gb).
	SingleMIGProfile string
	// SlicesPerGPU is the number of MIG compute slices of one GPU (7; 4 for A30); 0 means 7.
	SlicesPerGPU int32
}

// Demand is what pods waiting to be scheduled ask for, for one requested model.
type Demand struct {
	// Model is the product the pods pin: the GFD label's form for pods (DRA false), the
	// driver's productName for claims (DRA true); empty for pods that take any model.
	Model string
	DRA   bool
	Pods  int32
	// Milli is the GPUs asked for, in thousandths (docs/api.md: how parts count).
	Milli int64
	// Since is the creation time of the oldest waiting pod or claim, Unix seconds.
	Since int64
	// Queued: the pods are gated (spec.schedulingGates): the scheduler does not try them yet.
	Queued bool
}
