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

// Package quota puts what quota promises of the GPUs (Kueue's ClusterQueues and Cohorts,
// and ResourceQuotas) beside the hardware that quota can reach, per model, cohort and queue,
// and finds quota larger than that hardware (overcommitted) and hardware or quota that
// nothing can use (stranded). It is pure: the caches hand it what they read.
package quota

import (
	corev1 "k8s.io/api/core/v1"
)

// Cluster is everything Compute reads.
type Cluster struct {
	// Kueue is what Kueue's objects say; nil when the API server serves no Kueue.
	Kueue *Kueue
	// ResourceQuotas are the ResourceQuotas that limit a GPU resource.
	ResourceQuotas []NamespaceQuota
	// Nodes are the GPU nodes, as the inventory knows them.
	Nodes []Node
	// DRAResources are the resource names Kueue's deviceClassMappings count DRA GPUs in; a
	// node's DRA whole GPUs are in its Resources under that name.
	DRAResources []corev1.ResourceName
}

// Kueue is what Kueue's objects say, in the version the API server serves.
type Kueue struct {
	// Version is the kueue.x-k8s.io version read ("v1beta2" or "v1beta1").
	Version       string
	Flavors       []Flavor
	ClusterQueues []ClusterQueue
	Cohorts       []Cohort
	LocalQueues   []LocalQueue
}

// Flavor is a ResourceFlavor as it ties quota to nodes: a node is the flavor's when it has
// every one of NodeLabels and carries every one of NodeTaints (key, value and effect).
type Flavor struct {
	Name       string
	NodeLabels map[string]string
	NodeTaints []corev1.Taint
}

// Limit is a ClusterQueue's (or Cohort's) quota of one resource in one flavor, in the
// resource's unit (resource.Quantity.Value()).
type Limit struct {
	Flavor   string
	Resource corev1.ResourceName
	Nominal  int64
	// BorrowingLimit and LendingLimit are nil when unset (no limit).
	BorrowingLimit *int64
	LendingLimit   *int64
}

// Usage is Kueue's count of one resource in one flavor (status.flavorsReservation or
// status.flavorsUsage).
type Usage struct {
	Flavor   string
	Resource corev1.ResourceName
	Total    int64
	Borrowed int64
}

// ClusterQueue is a ClusterQueue's quota and Kueue's report of its use.
type ClusterQueue struct {
	Name string
	// Cohort is spec.cohortName (v1beta2) or spec.cohort (v1beta1); empty: in none.
	Cohort   string
	Quotas   []Limit
	Reserved []Usage // status.flavorsReservation
	Used     []Usage // status.flavorsUsage
	// Pending, Reserving and Admitted are status.pendingWorkloads, reservingWorkloads and
	// admittedWorkloads.
	Pending, Reserving, Admitted int32
}

// Cohort is a Cohort object: its parent (hierarchical cohorts) and its own quota.
type Cohort struct {
	Name   string
	Parent string // spec.parentName (v1beta2) or spec.parent (v1beta1)
	Quotas []Limit
}

// LocalQueue is a namespace's queue into a ClusterQueue.
type LocalQueue struct {
	Namespace, Name, ClusterQueue string
	Pending, Admitted             int32
}

// NamespaceQuota is one ResourceQuota's limits of GPU resources (requests.nvidia.com/gpu,
// requests.<MIG resource>, <class>.deviceclass.resource.k8s.io/devices), keyed by the
// resource name as the quota writes it.
type NamespaceQuota struct {
	Namespace, Name string
	Hard, Used      map[corev1.ResourceName]int64
}

// Node is one GPU node as the inventory knows it.
type Node struct {
	Name string
	// Labels are the node's labels (at least those that flavors name).
	Labels map[string]string
	// Taints are the node's NoSchedule and NoExecute taints.
	Taints []corev1.Taint
	// Model is the node's GPU product.
	Model string
	// Ready: the node can take pods (Ready and not cordoned).
	Ready bool
	// Resources are the GPU resources the node offers, in their own units.
	Resources []NodeResource
}

// NodeResource is one GPU resource of a node: what it has and what the scheduler could
// grant now. A ResourceQuota's DRA limit (<class>.deviceclass.resource.k8s.io/devices) is
// compared with the node resources of that same name.
type NodeResource struct {
	Name corev1.ResourceName
	// Capacity is the node's allocatable count (for DRA, its devices of the class).
	Capacity int64
	Free     int64
}
