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
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	corev1 "k8s.io/api/core/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Identity is the GPU identity of a node's entry, as a GpuNode record keeps it: what the
// node is, not how it is doing (readiness, cordoning and allocation are left out, and so is
// MIG's transient configState). The GPUs' health conditions and the warnings are kept: they
// change when a GPU fails or a source contradicts another, not with every heartbeat.
func Identity(entry *homelabv1.GpuNodeEntry) homelabv1.GpuNodeSpec {
	spec := homelabv1.GpuNodeSpec{
		Product: entry.Product, GpuCount: entry.GpuCount, GpuMemoryMiB: entry.GpuMemoryMiB,
		Family: entry.Family, ComputeCapability: entry.ComputeCapability,
		DriverVersion: entry.DriverVersion, CudaVersion: entry.CudaVersion, WorkloadConfig: entry.WorkloadConfig,
		Clique: entry.Clique, Source: cmp.Or(entry.Source, homelabv1.SourceGPUFeatureDiscovery),
	}
	for _, c := range entry.Conditions {
		if !stateCondition(c) {
			spec.Conditions = append(spec.Conditions, c)
		}
	}
	spec.Warnings = slices.Clone(entry.Warnings)
	if entry.Sharing != nil {
		sharing := *entry.Sharing
		spec.Sharing = &sharing
	}
	if entry.MIG != nil {
		mig := *entry.MIG
		mig.ConfigState = ""
		mig.Devices = append([]homelabv1.MigDevice(nil), entry.MIG.Devices...)
		spec.MIG = &mig
	}
	return spec
}

// stateCondition reports whether a node condition is the node's state rather than its GPUs'
// health: readiness, cordoning and missing labels are in the inventory, not the record.
func stateCondition(c string) bool {
	switch c {
	case NodeNotReady, NodeUnreachable, NodeLabelsMissing, NodeCordoned:
		return true
	}
	return false
}

// KnowsGPUs reports whether an identity says anything about the node's GPUs: a record that
// does not is no last-known memory.
func KnowsGPUs(spec *homelabv1.GpuNodeSpec) bool {
	return spec.Product != "" || spec.GpuCount != 0 || spec.GpuMemoryMiB != 0
}

// EntryKnowsGPUs is KnowsGPUs for an entry: one that knows nothing of the GPUs (a node never
// labelled) is no last-known memory either.
func EntryKnowsGPUs(e *homelabv1.GpuNodeEntry) bool {
	return e.Product != "" || e.GpuCount != 0 || e.GpuMemoryMiB != 0
}

// IdentityHash identifies an identity's facts and whether they are missing; the times are
// left out, so that a record is rewritten only when the facts change, vanish or come back.
func IdentityHash(spec homelabv1.GpuNodeSpec) string {
	missing := spec.MissingSince != nil
	spec.LastSeen, spec.MissingSince = nil, nil
	b, _ := json.Marshal(struct {
		Spec    homelabv1.GpuNodeSpec `json:"spec"`
		Missing bool                  `json:"missing"`
	}{spec, missing}) // strings, integers and bools: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// NodeIdentity returns the GPU identity of a node that a discovery source describes now, or
// whose nvidia.com/gpu capacity is all that is known (spec.Source says which), with the
// node's entry taken from the cache (a nil cache parses it) and the devices its DRA slices
// list; ok is false for a node that states nothing of its GPUs and for one that is no GPU node.
func (c *EntryCache) NodeIdentity(node *corev1.Node) (spec homelabv1.GpuNodeSpec, ok bool) {
	if c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.drainLocked()
	}
	cached := c.lookupLocked(node)
	if !cached.gpu || !cached.known && cached.entry.shared.Value().source != homelabv1.SourceDevicePlugin {
		return spec, false
	}
	var entry homelabv1.GpuNodeEntry
	cached.entry.expand(&entry)
	spec = Identity(&entry)
	switch {
	case cached.facts == nil || cached.facts.Pending:
	case c != nil && c.deviceList != nil:
		spec.Devices = c.deviceList(node.Name)
	default:
		spec.Devices = slices.Clone(cached.facts.Devices)
	}
	return spec, true
}

// SeededIdentity is the identity of a stored entry (an inventory's status.nodes or the
// ConfigMap) as a seeded record keeps it: bounded like Entry's own, since anyone who may edit
// those objects could have written it, and marked as seeded.
func SeededIdentity(entry *homelabv1.GpuNodeEntry) homelabv1.GpuNodeSpec {
	e := entry.DeepCopy()
	bound(e)
	spec := Identity(e)
	spec.GpuCount, spec.GpuMemoryMiB = max(spec.GpuCount, 0), max(spec.GpuMemoryMiB, 0)
	spec.Source = homelabv1.SourceSeeded
	spec.Conditions, spec.Warnings = nil, nil // the seed is the identity, not how the node was doing
	return spec
}
