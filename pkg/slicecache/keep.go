// Package slicecache is where NVIDIA's DRA ResourceSlices (driver gpu.nvidia.com) are
// cached: trimmed to what inventory.DeviceFactsOf reads, indexed by node, with each node's
// DeviceFacts recomputed from that node's slices when one of them changes.
// docs/design/slice-cache.md says why.
package slicecache

import (
	"strings"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/inventory"
)

// The keep-rules: what the cache holds of a device, which is what inventory.DeviceFactsOf
// reads (pkg/inventory/dra.go). Attribute names are unqualified (the driver's own domain)
// or qualified with the driver's or Kubernetes' domain.
var (
	// keptAttributes are the device attributes DeviceFactsOf reads, by unqualified name.
	keptAttributes = map[string]bool{
		"type": true, "uuid": true, "productName": true, "architecture": true,
		"cudaComputeCapability": true, "driverVersion": true, "cudaDriverVersion": true,
		"profile": true, "parentUUID": true, "pciBusID": true,
	}
	// keptQualifiedAttributes are attributes of other domains that DeviceFactsOf reads.
	keptQualifiedAttributes = map[string]bool{"resource.kubernetes.io/pciBusID": true}
)

// keptCapacities are the device capacities DeviceFactsOf reads: memory, in either spelling.
var keptCapacities = []resourcev1.QualifiedName{"memory", inventory.DRADriver + "/memory"}

// uniqueAttribute is an attribute whose value differs on every device: not interned.
const uniqueAttribute = "uuid"

// keepsAttribute reports whether the cache holds the device attribute name.
func keepsAttribute(name resourcev1.QualifiedName) bool {
	s := string(name)
	if keptQualifiedAttributes[s] {
		return true
	}
	return keptAttributes[strings.TrimPrefix(s, inventory.DRADriver+"/")]
}

// nodeLocal reports whether a slice is one the cache reads: the NVIDIA driver's, bound to a
// node (network-attached pools, with a node selector or all nodes, are not node-local).
func nodeLocal(s *resourcev1.ResourceSlice) bool {
	return s.Spec.Driver == inventory.DRADriver && s.Spec.NodeName != nil && *s.Spec.NodeName != ""
}

// Trim is the informer's transform: a node-local gpu.nvidia.com slice keeps only what
// DeviceFactsOf reads; any other slice keeps its name, resourceVersion and driver, so the
// informer can still track (and delete) it. Anything else passes untouched, and a trimmed
// slice trims to itself, so it may run twice.
func (t *trimmer) Trim(obj any) (any, error) {
	s, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return obj, nil
	}
	return t.trim(s), nil
}

func (t *trimmer) trim(s *resourcev1.ResourceSlice) *resourcev1.ResourceSlice {
	out := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, ResourceVersion: s.ResourceVersion},
		Spec:       resourcev1.ResourceSliceSpec{Driver: t.intern(s.Spec.Driver)},
	}
	if v, ok := s.Annotations[metav1.InitialEventsAnnotationKey]; ok {
		// The watch-list bookmark's marker: the reflector waits for it.
		out.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: v}
	}
	if !nodeLocal(s) {
		return out
	}
	out.Spec.NodeName = s.Spec.NodeName
	out.Spec.Pool = s.Spec.Pool
	// A counters slice (DynamicMIG) counts towards its pool by its pool alone: its counter
	// sets are not read.
	if len(s.Spec.Devices) > 0 {
		out.Spec.Devices = make([]resourcev1.Device, len(s.Spec.Devices))
		for i := range s.Spec.Devices {
			out.Spec.Devices[i] = t.device(&s.Spec.Devices[i])
		}
	}
	return out
}

func (t *trimmer) device(d *resourcev1.Device) resourcev1.Device {
	out := resourcev1.Device{Name: t.intern(d.Name)}
	for name, a := range d.Attributes {
		if !keepsAttribute(name) {
			continue
		}
		if out.Attributes == nil {
			out.Attributes = make(map[resourcev1.QualifiedName]resourcev1.DeviceAttribute, len(keptAttributes)+len(keptQualifiedAttributes))
		}
		out.Attributes[resourcev1.QualifiedName(t.intern(string(name)))] = t.attribute(a, strings.TrimPrefix(string(name), inventory.DRADriver+"/") != uniqueAttribute)
	}
	for _, name := range keptCapacities {
		if c, ok := d.Capacity[name]; ok {
			if out.Capacity == nil {
				out.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}
			}
			out.Capacity[name] = resourcev1.DeviceCapacity{Value: c.Value}
		}
	}
	if len(d.ConsumesCounters) > 0 {
		// Counter set names only: that a device draws on shared counters (a possible
		// partition, not a published GPU) is what is read, not how much.
		out.ConsumesCounters = make([]resourcev1.DeviceCounterConsumption, len(d.ConsumesCounters))
		for i, c := range d.ConsumesCounters {
			out.ConsumesCounters[i] = resourcev1.DeviceCounterConsumption{CounterSet: t.intern(c.CounterSet)}
		}
	}
	if len(d.Taints) > 0 {
		out.Taints = make([]resourcev1.DeviceTaint, len(d.Taints))
		for i, taint := range d.Taints {
			out.Taints[i] = resourcev1.DeviceTaint{Key: t.intern(taint.Key), Effect: taint.Effect}
		}
	}
	return out
}

// attribute keeps an attribute's string or version value, the only ones read. Shared values
// point at one interned string.
func (t *trimmer) attribute(a resourcev1.DeviceAttribute, shared bool) resourcev1.DeviceAttribute {
	str := func(p *string) *string {
		if p == nil || !shared {
			return p
		}
		return t.internPtr(*p)
	}
	return resourcev1.DeviceAttribute{
		StringValue:  str(a.StringValue),
		VersionValue: str(a.VersionValue),
	}
}

// Bounds of the intern table, so that ever-changing values cannot grow it forever: a full
// table starts over (cached slices keep what they have).
const (
	maxInternedBytes  = 1 << 20
	internOverhead    = 64 // a table entry besides the string's bytes
	maxInternedString = 256
)

// trimmer holds the strings that cached slices share: device names, attribute names and
// the values that repeat across devices and nodes (product, architecture, versions, PCI bus
// IDs), each as one string behind one pointer.
type trimmer struct {
	mu    sync.Mutex
	table map[string]*string
	bytes int
}

func (t *trimmer) internPtr(s string) *string {
	if len(s) > maxInternedString {
		return &s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.table[s]; ok {
		return p
	}
	if t.table == nil || t.bytes+len(s)+internOverhead > maxInternedBytes {
		t.table, t.bytes = map[string]*string{}, 0
	}
	p := &s
	t.table[s] = p
	t.bytes += len(s) + internOverhead
	return p
}

func (t *trimmer) intern(s string) string { return *t.internPtr(s) }
