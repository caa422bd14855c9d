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
	"fmt"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// How much of a node's slices DeviceFacts keeps: the record's bounds (GpuNodeSpec.Devices and
// GpuDevice's MaxLength markers) and a guard against hostile or broken slices.
const (
	maxListedDevices   = 64
	maxDeviceTaints    = 8
	maxFactWarnings    = 8
	maxMigProfiles     = 32
	maxProducts        = 32
	maxDeviceMemory    = int64(1) << 50 // bytes; a larger capacity is a broken slice, not a GPU
	maxDeviceStringLen = 128
)

// DeviceAttribute names one device attribute that DeviceFactsOf reads. The driver writes its
// own attributes unqualified ("type"), which the API defines as belonging to the driver's
// domain, so the qualified spelling ("gpu.nvidia.com/type") means the same and is read when
// the first is absent. The slice cache keeps exactly these (pkg/slicecache).
type DeviceAttribute struct{ Name, Alt resourcev1.QualifiedName }

func driverAttribute(name string) DeviceAttribute {
	return DeviceAttribute{resourcev1.QualifiedName(name), resourcev1.QualifiedName(DRADriver + "/" + name)}
}

// The attributes and the capacity DeviceFactsOf reads.
var (
	AttrType         = driverAttribute("type")
	AttrUUID         = driverAttribute("uuid")
	AttrParentUUID   = driverAttribute("parentUUID")
	AttrProfile      = driverAttribute("profile")
	AttrProductName  = driverAttribute("productName")
	AttrArchitecture = driverAttribute("architecture")
	AttrCC           = driverAttribute("cudaComputeCapability")
	AttrDriver       = driverAttribute("driverVersion")
	AttrCuda         = driverAttribute("cudaDriverVersion")
	// The standard attribute of k8s.io/dynamic-resource-allocation/deviceattribute; the
	// driver-domain spelling is accepted as a fallback.
	AttrPCIBusID = DeviceAttribute{"resource.kubernetes.io/pciBusID", "pciBusID"}

	CapMemory = driverAttribute("memory")
)

// Value returns the attribute's string or version value ("" when absent or of another kind;
// an attribute under Name hides one under Alt).
func (k DeviceAttribute) Value(d *resourcev1.Device) string {
	a, ok := d.Attributes[k.Name]
	if !ok {
		a, ok = d.Attributes[k.Alt]
	}
	switch {
	case !ok:
		return ""
	case a.StringValue != nil:
		return *a.StringValue
	case a.VersionValue != nil:
		return *a.VersionValue
	}
	return ""
}

// Capacity returns the device's capacity under the name (or its alternative spelling).
func (k DeviceAttribute) Capacity(d *resourcev1.Device) (resource.Quantity, bool) {
	c, ok := d.Capacity[k.Name]
	if !ok {
		c, ok = d.Capacity[k.Alt]
	}
	return c.Value, ok
}

// Values of the driver's type attribute.
const (
	draTypeGPU  = "gpu"
	draTypeMIG  = "mig"
	draTypeVFIO = "vfio"
)

// NormalizeProduct turns a product name into GFD's label form ("NVIDIA H100 80GB HBM3" ->
// "NVIDIA-H100-80GB-HBM3"): GFD replaces each space of the NVML name with '-'
// (k8s-device-plugin internal/lm/resource.go productLabel); surrounding space is trimmed.
func NormalizeProduct(name string) string {
	name = strings.TrimSpace(name)
	if strings.IndexByte(name, ' ') < 0 {
		return name
	}
	return strings.ReplaceAll(name, " ", "-")
}

// DeviceFactsOf returns what a node's gpu.nvidia.com ResourceSlices say of its GPUs. slices are
// all slices of DRADriver whose spec.nodeName is the node (any pool, any generation, any
// order); others are ignored. nil when there are none.
//
// Only the highest generation of each pool counts, as for the scheduler: when it does not yet
// have all of its resourceSliceCount slices the facts are Pending, even if an older generation
// is complete, since the driver is replacing that one.
//
// What the driver (NVIDIA/k8s-dra-driver-gpu, cmd/gpu-kubelet-plugin) publishes, and how it
// is read here:
//   - type=gpu: a whole GPU gpu-<minor> with uuid, productName, architecture, versions, the
//     standard pciBusID and capacity memory in bytes. With DynamicMIG it also consumes its
//     counter set, and its memory is the largest MIG profile's.
//   - type=mig without consumesCounters and with a uuid: a MIG device that exists (static
//     MIG, MigDeviceInfo.GetDevice). Its GPU is not published whole (MIG mode is on), so the
//     GPU is counted through parentUUID (or the parent's pciBusID the device carries too).
//   - type=mig with consumesCounters (and no uuid): a DynamicMIG partition that could be
//     created (MigSpec.PartGetDevice). Not a MIG device; its parent still counts as a GPU,
//     since on a GPU whose MIG mode cannot be toggled the driver publishes only partitions.
//   - type=vfio: a passthrough device gpu-vfio-<index>. Its uuid is derived from its PCI bus
//     ID, not the GPU's UUID, and a GPU bound to the nvidia driver is published both as gpu
//     and as vfio, so a physical GPU is identified by its PCI bus ID first. Its productName is
//     the PCI database's, used only when no gpu or mig device names a product.
func DeviceFactsOf(slices []*resourcev1.ResourceSlice) *DeviceFacts {
	pools, complete := newestGenerations(slices)
	if len(pools) == 0 {
		return nil
	}
	if !complete {
		return &DeviceFacts{Pending: true}
	}
	b := factsBuilder{facts: &DeviceFacts{}}
	for _, p := range pools {
		if p.want <= 0 {
			b.warn("pool %s generation %d has resourceSliceCount %d", Cut(p.name, 64), p.gen, p.want)
		}
	}
	devs := newestDevices(slices, pools)
	b.physical(devs)
	b.mig(devs)
	b.list(devs)
	b.counters(slices, pools, devs)
	b.shareable(devs)
	b.summarise()
	return b.facts
}

// poolGen is the newest generation of one pool seen in a node's slices.
type poolGen struct {
	name       string
	gen        int64
	want, have int64 // resourceSliceCount and slices present, of generation gen
}

// newestGenerations finds each pool's highest generation, sorted by pool name; complete is
// false when one of them still lacks slices.
func newestGenerations(in []*resourcev1.ResourceSlice) (pools []poolGen, complete bool) {
	for _, s := range in {
		if s == nil || s.Spec.Driver != DRADriver {
			continue
		}
		p := &s.Spec.Pool
		i := slices.IndexFunc(pools, func(g poolGen) bool { return g.name == p.Name })
		switch {
		case i < 0:
			pools = append(pools, poolGen{name: p.Name, gen: p.Generation, want: p.ResourceSliceCount, have: 1})
		case p.Generation > pools[i].gen:
			pools[i] = poolGen{name: p.Name, gen: p.Generation, want: p.ResourceSliceCount, have: 1}
		case p.Generation == pools[i].gen:
			pools[i].have++
			pools[i].want = max(pools[i].want, p.ResourceSliceCount)
		}
	}
	slices.SortFunc(pools, func(a, b poolGen) int { return strings.Compare(a.name, b.name) })
	for _, p := range pools {
		if p.have < p.want {
			return pools, false
		}
	}
	return pools, true
}

// draDevice is one device of a pool's newest generation.
type draDevice struct {
	dev         *resourcev1.Device
	pool, slice string
	kind        string
	potential   bool // a DynamicMIG partition that does not exist yet
}

// newestDevices returns the devices of the pools' newest generations, sorted by name (then
// pool and slice, so that the order never depends on the order of the input), duplicates
// dropped.
func newestDevices(in []*resourcev1.ResourceSlice, pools []poolGen) []draDevice {
	n := 0
	for _, s := range in {
		if s != nil && s.Spec.Driver == DRADriver {
			n += len(s.Spec.Devices)
		}
	}
	devs := make([]draDevice, 0, n)
	for _, s := range in {
		if s == nil || s.Spec.Driver != DRADriver {
			continue
		}
		i := slices.IndexFunc(pools, func(g poolGen) bool { return g.name == s.Spec.Pool.Name })
		if i < 0 || pools[i].gen != s.Spec.Pool.Generation {
			continue
		}
		for j := range s.Spec.Devices {
			d := &s.Spec.Devices[j]
			kind := AttrType.Value(d)
			devs = append(devs, draDevice{
				dev: d, pool: s.Spec.Pool.Name, slice: s.Name, kind: kind,
				potential: kind == draTypeMIG && (len(d.ConsumesCounters) > 0 || AttrUUID.Value(d) == ""),
			})
		}
	}
	slices.SortFunc(devs, func(a, b draDevice) int {
		return cmp.Or(strings.Compare(a.dev.Name, b.dev.Name), strings.Compare(a.pool, b.pool), strings.Compare(a.slice, b.slice))
	})
	return slices.CompactFunc(devs, func(a, b draDevice) bool { return a.dev.Name == b.dev.Name && a.pool == b.pool })
}

// physGPU is one physical GPU, known from its gpu, vfio or MIG devices.
type physGPU struct {
	uuid, pci string
	product   string // normalised, from a gpu or mig device
	pciName   string // normalised, from a vfio device
	memoryMiB int64
	unhealthy bool
}

// factsBuilder accumulates the facts of one node's devices.
type factsBuilder struct {
	facts   *DeviceFacts
	gpus    []physGPU
	byUUID  map[string]int // built once there are too many GPUs for a linear search
	byPCI   map[string]int
	dropped int // warnings beyond maxFactWarnings
}

const linearGPUSearch = 32

func (b *factsBuilder) warn(format string, args ...any) {
	if len(b.facts.Warnings) >= maxFactWarnings {
		b.dropped++
		return
	}
	b.facts.Warnings = append(b.facts.Warnings, Cut(fmt.Sprintf(format, args...), 256))
}

// find returns the index of the GPU with this UUID or PCI bus ID (either may be empty), or -1.
func (b *factsBuilder) find(uuid, pci string) int {
	if b.byUUID != nil {
		if i, ok := b.byPCI[pci]; ok && pci != "" {
			return i
		}
		if i, ok := b.byUUID[uuid]; ok && uuid != "" {
			return i
		}
		return -1
	}
	for i := range b.gpus {
		if (pci != "" && b.gpus[i].pci == pci) || (uuid != "" && b.gpus[i].uuid == uuid) {
			return i
		}
	}
	return -1
}

func (b *factsBuilder) add(g physGPU) int {
	b.gpus = append(b.gpus, g)
	i := len(b.gpus) - 1
	if b.byUUID == nil && len(b.gpus) > linearGPUSearch {
		b.byUUID, b.byPCI = make(map[string]int, 2*len(b.gpus)), make(map[string]int, 2*len(b.gpus))
		for j := range b.gpus[:i] {
			b.index(j)
		}
	}
	if b.byUUID != nil {
		b.index(i)
	}
	return i
}

func (b *factsBuilder) index(i int) {
	if u := b.gpus[i].uuid; u != "" {
		if _, ok := b.byUUID[u]; !ok {
			b.byUUID[u] = i
		}
	}
	if p := b.gpus[i].pci; p != "" {
		if _, ok := b.byPCI[p]; !ok {
			b.byPCI[p] = i
		}
	}
}

// merge fills in what GPU i lacks from another device of the same GPU.
func (b *factsBuilder) merge(i int, uuid, pci string) {
	g := &b.gpus[i]
	if g.uuid == "" && uuid != "" {
		g.uuid = uuid
		if b.byUUID != nil {
			b.index(i)
		}
	}
	if g.pci == "" && pci != "" {
		g.pci = pci
		if b.byPCI != nil {
			b.index(i)
		}
	}
}

// physical reads the gpu and vfio devices: one physical GPU per PCI bus ID, else per UUID.
func (b *factsBuilder) physical(devs []draDevice) {
	for _, d := range devs {
		if d.kind != draTypeGPU && d.kind != draTypeVFIO {
			if d.kind != draTypeMIG {
				b.warn("device %s has type %q, not gpu, mig or vfio: ignored", Cut(d.dev.Name, 64), Cut(d.kind, 32))
			}
			continue
		}
		uuid, pci := AttrUUID.Value(d.dev), AttrPCIBusID.Value(d.dev)
		if d.kind == draTypeVFIO && pci != "" {
			uuid = "" // derived from the PCI bus ID by the driver: not the GPU's UUID
		}
		if uuid == "" && pci == "" {
			b.warn("device %s (%s) has neither uuid nor pciBusID", Cut(d.dev.Name, 64), d.kind)
			uuid = d.pool + "/" + d.dev.Name
		}
		i := b.find(uuid, pci)
		if i < 0 {
			i = b.add(physGPU{uuid: uuid, pci: pci})
		} else {
			b.merge(i, uuid, pci)
		}
		g := &b.gpus[i]
		product := NormalizeProduct(AttrProductName.Value(d.dev))
		if d.kind == draTypeVFIO {
			if g.pciName == "" {
				g.pciName = product
			}
		} else {
			if g.product == "" {
				g.product = product
			}
			if mib, ok := b.memoryMiB(d); ok {
				g.memoryMiB = max(g.memoryMiB, mib)
			}
			b.versions(d.dev)
		}
		tainted := b.taints(d.dev)
		if tainted {
			g.unhealthy = true
		}
		if n, ok := allocation.GPUIndex(d.dev.Name); ok && d.kind == draTypeGPU {
			b.facts.WholeGPUs |= 1 << n
			if tainted {
				b.facts.TaintedGPUs |= 1 << n
			}
		}
	}
}

// mig reads the MIG devices: static ones are tallied per profile; static and DynamicMIG ones
// name their GPU, which counts when it is not published whole.
func (b *factsBuilder) mig(devs []draDevice) {
	for _, d := range devs {
		if d.kind != draTypeMIG {
			continue
		}
		parent, pci := AttrParentUUID.Value(d.dev), AttrPCIBusID.Value(d.dev)
		i := -1
		if parent == "" && pci == "" {
			b.warn("MIG device %s has neither parentUUID nor pciBusID", Cut(d.dev.Name, 64))
		} else if i = b.find(parent, pci); i < 0 {
			i = b.add(physGPU{uuid: parent, pci: pci})
		} else {
			b.merge(i, parent, pci)
		}
		unhealthy := b.taints(d.dev)
		if i >= 0 {
			g := &b.gpus[i]
			if g.product == "" {
				g.product = NormalizeProduct(AttrProductName.Value(d.dev))
			}
			g.unhealthy = g.unhealthy || unhealthy
		}
		b.versions(d.dev)
		if d.potential {
			continue
		}
		profile := AttrProfile.Value(d.dev)
		if profile == "" {
			b.warn("MIG device %s has no profile", Cut(d.dev.Name, 64))
			continue
		}
		mib, _ := b.memoryMiB(d)
		b.tallyMIG(Cut(profile, 64), mib)
	}
	slices.SortFunc(b.facts.MIG, func(a, c homelabv1.MigDevice) int { return strings.Compare(a.Profile, c.Profile) })
}

func (b *factsBuilder) tallyMIG(profile string, mib int64) {
	for i := range b.facts.MIG {
		if m := &b.facts.MIG[i]; m.Profile == profile {
			m.Count++
			m.MemoryMiB = max(m.MemoryMiB, mib)
			return
		}
	}
	if len(b.facts.MIG) >= maxMigProfiles {
		b.warn("more than %d MIG profiles: %s not counted", maxMigProfiles, profile)
		return
	}
	b.facts.MIG = append(b.facts.MIG, homelabv1.MigDevice{Profile: profile, Count: 1, MemoryMiB: mib})
}

// versions takes the node's versions from the first device that states them.
func (b *factsBuilder) versions(d *resourcev1.Device) {
	f := b.facts
	if f.Family == "" {
		if a := AttrArchitecture.Value(d); a != "" {
			f.Family = Cut(strings.ReplaceAll(strings.ToLower(strings.TrimSpace(a)), " ", "-"), maxDeviceStringLen)
		}
	}
	if f.ComputeCapability == "" {
		f.ComputeCapability = b.majorMinor(d, AttrCC)
	}
	if f.CudaVersion == "" {
		f.CudaVersion = b.majorMinor(d, AttrCuda)
	}
	if f.DriverVersion == "" {
		f.DriverVersion = Cut(AttrDriver.Value(d), maxDeviceStringLen)
	}
}

// majorMinor returns "9.0" of a version attribute "9.0.0" ("" with a warning if it is not a
// version).
func (b *factsBuilder) majorMinor(d *resourcev1.Device, k DeviceAttribute) string {
	v := k.Value(d)
	if v == "" {
		return ""
	}
	major, rest, ok := strings.Cut(v, ".")
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if !ok || !isDigits(major) || n == 0 || len(major) > 4 || n > 4 {
		b.warn("device %s: %s %q is not a version", Cut(d.Name, 64), k.Name, Cut(v, 32))
		return ""
	}
	return v[:len(major)+1+n]
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// memoryMiB reads a device's memory capacity (bytes) as MiB. A GPU may have none: the driver
// omits it where NVML does not report memory (deviceinfo.go getGpuInfo, fullGpuCapacity).
func (b *factsBuilder) memoryMiB(d draDevice) (int64, bool) {
	mib, present, ok := deviceMemoryMiB(d.dev)
	if present && !ok {
		b.warn("device %s: memory capacity is out of range", Cut(d.dev.Name, 64))
	}
	return mib, ok
}

func deviceMemoryMiB(d *resourcev1.Device) (mib int64, present, ok bool) {
	c, present := CapMemory.Capacity(d)
	if !present || c.Sign() < 0 || c.CmpInt64(maxDeviceMemory) > 0 {
		return 0, present, false
	}
	return c.Value() >> 20, true, true
}

// taints notes whether a device carries taints, and reports whether one makes it unusable.
func (b *factsBuilder) taints(d *resourcev1.Device) (unhealthy bool) {
	if len(d.Taints) > 0 {
		b.facts.Tainted = true
	}
	for _, t := range d.Taints {
		if t.Effect == resourcev1.DeviceTaintEffectNoSchedule || t.Effect == resourcev1.DeviceTaintEffectNoExecute {
			return true
		}
	}
	return false
}

// list records the published gpu, vfio and static MIG devices, sorted by name, bounded.
func (b *factsBuilder) list(devs []draDevice) {
	more := 0
	for _, d := range devs {
		if (d.kind != draTypeGPU && d.kind != draTypeVFIO && d.kind != draTypeMIG) || d.potential {
			continue
		}
		if len(b.facts.Devices) >= maxListedDevices {
			more++
			continue
		}
		if b.facts.Devices == nil {
			b.facts.Devices = make([]homelabv1.GpuDevice, 0, min(len(devs), maxListedDevices))
		}
		gd := homelabv1.GpuDevice{
			Name:       Cut(d.dev.Name, maxDeviceStringLen),
			Type:       d.kind,
			UUID:       Cut(AttrUUID.Value(d.dev), maxDeviceStringLen),
			PCIBusID:   Cut(AttrPCIBusID.Value(d.dev), 64),
			Profile:    Cut(AttrProfile.Value(d.dev), 64),
			ParentUUID: Cut(AttrParentUUID.Value(d.dev), maxDeviceStringLen),
		}
		if d.kind != draTypeVFIO {
			gd.MemoryMiB, _, _ = deviceMemoryMiB(d.dev)
		}
		for i, t := range d.dev.Taints {
			if i == maxDeviceTaints {
				break
			}
			gd.Taints = append(gd.Taints, Cut(t.Key+":"+string(t.Effect), maxDeviceStringLen))
		}
		b.facts.Devices = append(b.facts.Devices, gd)
	}
	if more > 0 {
		b.warn("%d more devices not listed", more)
	}
}

// summarise derives the node's count, product and memory from its physical GPUs.
func (b *factsBuilder) summarise() {
	f := b.facts
	f.GpuCount = int32(min(len(b.gpus), 1<<30))
	type vote struct {
		product string
		n       int
	}
	var votes []vote
	byPCIName := true
	for _, g := range b.gpus {
		if g.product != "" {
			byPCIName = false
			break
		}
	}
	var minMiB int64
	for _, g := range b.gpus {
		if g.unhealthy {
			f.UnhealthyGpus++
		}
		if g.memoryMiB > 0 {
			if f.GpuMemoryMiB == 0 || g.memoryMiB < minMiB {
				minMiB = g.memoryMiB
			}
			f.GpuMemoryMiB = max(f.GpuMemoryMiB, g.memoryMiB)
		}
		p := g.product
		if byPCIName {
			p = g.pciName
		}
		if p == "" {
			continue
		}
		if j := slices.IndexFunc(votes, func(v vote) bool { return v.product == p }); j >= 0 {
			votes[j].n++
		} else if len(votes) < maxProducts {
			votes = append(votes, vote{p, 1})
		}
	}
	if minMiB != f.GpuMemoryMiB {
		b.warn("GPU memory differs between GPUs (%d to %d MiB): the largest is used", minMiB, f.GpuMemoryMiB)
	}
	if len(votes) > 0 {
		slices.SortFunc(votes, func(a, c vote) int { return cmp.Or(cmp.Compare(c.n, a.n), strings.Compare(a.product, c.product)) })
		f.Product = Cut(votes[0].product, maxDeviceStringLen)
		if len(votes) > 1 {
			b.warn("GPUs of %d products: %s (%d), %s (%d)...: counted as %s",
				len(votes), Cut(votes[0].product, 48), votes[0].n, Cut(votes[1].product, 48), votes[1].n, Cut(votes[0].product, 48))
		}
	}
	if b.dropped > 0 {
		f.Warnings[len(f.Warnings)-1] = fmt.Sprintf("%d more warnings", b.dropped+1)
	}
}
