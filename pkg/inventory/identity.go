package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Identity is the GPU identity of a node's entry, as a GpuNode record keeps it: what the
// node is, not how it is doing (readiness, allocation and warnings are left out, and so is
// MIG's transient configState).
func Identity(entry *homelabv1.GpuNodeEntry) homelabv1.GpuNodeSpec {
	spec := homelabv1.GpuNodeSpec{
		Product: entry.Product, GpuCount: entry.GpuCount, GpuMemoryMiB: entry.GpuMemoryMiB,
		Family: entry.Family, ComputeCapability: entry.ComputeCapability,
		DriverVersion: entry.DriverVersion, CudaVersion: entry.CudaVersion, WorkloadConfig: entry.WorkloadConfig,
		Source: homelabv1.SourceGPUFeatureDiscovery,
	}
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

// KnowsGPUs reports whether an identity says anything about the node's GPUs: a record that
// does not is no last-known memory.
func KnowsGPUs(spec *homelabv1.GpuNodeSpec) bool {
	return spec.Product != "" || spec.GpuCount != 0 || spec.GpuMemoryMiB != 0
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
