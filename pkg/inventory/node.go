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
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Warning is a label value that could not be read, or that contradicts another. The node is
// still listed; the field that the label feeds is left at its zero value.
type Warning struct {
	Node   string
	Label  string
	Value  string
	Reason string
}

func (w Warning) String() string {
	return fmt.Sprintf("node %s: label %s=%q ignored: %s", w.Node, w.Label, w.Value, w.Reason)
}

// short is the warning as kept in the node's entry (the node is implied).
func (w Warning) short() string {
	return fmt.Sprintf("%s=%q: %s", w.Label, w.Value, w.Reason)
}

// IsGPUNode reports whether a node carries an NVIDIA GPU, or did: GPU Feature Discovery's
// labels vanish when a node goes NotReady, but the GPU Operator's nvidia.com/gpu.deploy.* and
// nvidia.com/gpu.workload.config labels, NFD's PCI labels, managed clouds' accelerator labels
// and the kubelet's extended-resource capacity survive. (A DRA node carries the GPU
// Operator's or NFD's labels: the driver is deployed to the nodes they mark.)
func IsGPUNode(node *corev1.Node) bool {
	for key := range node.Labels {
		if strings.HasPrefix(key, LabelGPUPrefix) {
			return true // includes nvidia.com/gpu.present
		}
	}
	for _, key := range nfdNVIDIAPCILabels {
		if node.Labels[key] == "true" {
			return true
		}
	}
	if HasCloudAccelerator(node.Labels) {
		return true
	}
	capacity, ok := node.Status.Capacity[ResourceGPU]
	return ok && capacity.Sign() > 0
}

// IsReady reports whether the node's Ready condition is True; False, Unknown and a missing
// condition all mean not ready.
func IsReady(node *corev1.Node) bool {
	return readyStatus(node) == corev1.ConditionTrue
}

func readyStatus(node *corev1.Node) corev1.ConditionStatus {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// HasGFDLabels reports whether GPU Feature Discovery's labels are on the node.
func HasGFDLabels(node *corev1.Node) bool {
	for _, key := range gfdLabels {
		if _, ok := node.Labels[key]; ok {
			return true
		}
	}
	return false
}

// Entry reads one GPU node's inventory entry from its labels and status. Malformed label
// values never fail: the field stays zero and a Warning says what was ignored. Entry knows
// nothing of earlier scans; Compute adds last-known values for nodes that lost their labels.
func Entry(node *corev1.Node) (homelabv1.GpuNodeEntry, []Warning) { return EntryFrom(node, nil) }

// EntryFrom is Entry with what the node's DRA ResourceSlices say (nil: none). The sources
// are read in order: GPU Feature Discovery's labels, the slices (which win where the two
// disagree, with a warning), managed-cloud labels when neither is there, and the
// nvidia.com/gpu capacity alone when nothing else is.
func EntryFrom(node *corev1.Node, dra *DeviceFacts) (homelabv1.GpuNodeEntry, []Warning) {
	r := reader{node: node}
	entry, replicas := r.labelled()
	var sources []string
	if HasGFDLabels(node) {
		sources = append(sources, homelabv1.SourceGPUFeatureDiscovery)
	}
	r.capacity(&entry, replicas)
	if dra != nil && !dra.Pending {
		r.devices(&entry, dra, len(sources) > 0)
		sources = append(sources, homelabv1.SourceDRA)
	}
	if len(sources) == 0 {
		if cloud, ok := ReadCloudLabels(node.Labels); ok {
			r.cloud(&entry, cloud)
			sources = append(sources, cloud.Source)
		} else if entry.Capacity > 0 {
			entry.GpuCount = ceilDiv(entry.Capacity, max(replicas, 1))
			sources = append(sources, homelabv1.SourceDevicePlugin)
		}
	}
	if len(sources) > 0 && sources[0] != homelabv1.SourceGPUFeatureDiscovery || len(sources) > 1 {
		entry.Source = strings.Join(sources, ",") // empty: GPU Feature Discovery alone
	}
	r.conditions(&entry, dra)
	entry.Taints = schedulingTaints(node.Spec.Taints)
	for _, w := range r.warnings {
		entry.Warnings = append(entry.Warnings, w.short())
	}
	if dra != nil {
		entry.Warnings = append(entry.Warnings, dra.Warnings...)
	}
	bound(&entry)
	return entry, r.warnings
}

// maxEntryTaints bounds GpuNodeEntry.Taints.
const maxEntryTaints = 8

// schedulingTaints are the node's NoSchedule and NoExecute taints as key=value:Effect (key:Effect
// without a value), in the node's order; the node lifecycle's (node.kubernetes.io/), which
// the conditions NotReady, Unreachable and Cordoned already say, are left out.
func schedulingTaints(taints []corev1.Taint) []string {
	var out []string
	for _, t := range taints {
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute ||
			strings.HasPrefix(t.Key, "node.kubernetes.io/") {
			continue
		}
		if len(out) == maxEntryTaints {
			break
		}
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		out = append(out, Cut(s, 253)+":"+string(t.Effect))
	}
	return out
}

// labelled reads GPU Feature Discovery's labels (and the GPU Operator's workload and clique
// labels); replicas is the time-slicing replica count.
func (r *reader) labelled() (entry homelabv1.GpuNodeEntry, replicas int32) {
	lbl := r.node.Labels
	entry = homelabv1.GpuNodeEntry{
		Name:           r.node.Name,
		Ready:          IsReady(r.node),
		Product:        lbl[LabelProduct],
		WorkloadConfig: lbl[LabelWorkloadConfig],
		Family:         lbl[LabelFamily],
		Clique:         lbl[LabelClique],
	}
	if entry.WorkloadConfig == "" {
		entry.WorkloadConfig = homelabv1.DefaultWorkloadConfig
	}
	entry.GpuCount = int32(r.gpuCount())
	if mem := r.count(LabelMemory, 64); mem >= bytesThresholdMiB {
		entry.GpuMemoryMiB = mem / (1 << 20) // an old GFD release wrote bytes
	} else {
		entry.GpuMemoryMiB = mem
	}
	entry.ComputeCapability = version(lbl[LabelComputeMajor], lbl[LabelComputeMinor])
	entry.DriverVersion = firstNonEmpty(lbl[LabelDriverFull],
		version(lbl[LabelDriverMajor], lbl[LabelDriverMinor], lbl[LabelDriverRev]),
		version(lbl[LabelOldDriverMajor], lbl[LabelOldDriverMinor], lbl[LabelOldDriverRev]))
	entry.CudaVersion = firstNonEmpty(lbl[LabelRuntimeFull],
		version(lbl[LabelRuntimeMajor], lbl[LabelRuntimeMinor]),
		version(lbl[LabelOldRuntimeMajor], lbl[LabelOldRuntimeMinor]))

	replicas = int32(r.count(LabelReplicas, 32))
	if strategy := lbl[LabelSharing]; (strategy != "" && strategy != "none") || replicas > 1 {
		entry.Sharing = &homelabv1.GpuSharing{Strategy: strategy, Replicas: replicas}
	}
	entry.MIG = r.mig()
	return entry, replicas
}

// capacity reads the device plugin's capacity and allocatable, and the GPUs it stopped
// advertising.
func (r *reader) capacity(entry *homelabv1.GpuNodeEntry, replicas int32) {
	resource := ResourceGPU
	if _, ok := r.node.Status.Capacity[ResourceGPU]; !ok {
		if _, ok := r.node.Status.Capacity[ResourceGPUShared]; ok {
			resource = ResourceGPUShared
		}
	}
	capacity, hasCapacity := r.node.Status.Capacity[resource]
	allocatable, hasAllocatable := r.node.Status.Allocatable[resource]
	if hasCapacity {
		entry.Capacity = clampInt32(capacity.Value())
	}
	if hasAllocatable {
		entry.Allocatable = clampInt32(allocatable.Value())
	}
	if hasCapacity && hasAllocatable && entry.Allocatable < entry.Capacity {
		missing := int64(entry.Capacity) - int64(entry.Allocatable)
		if replicas > 1 { // one unhealthy GPU takes all its replicas out of allocatable
			missing = (missing + int64(replicas) - 1) / int64(replicas)
		}
		entry.UnhealthyGpus = clampInt32(missing)
	}
	r.checkCapacity(*entry, replicas)
}

// conditions lists what deserves a human's attention, in a fixed order.
func (r *reader) conditions(entry *homelabv1.GpuNodeEntry, dra *DeviceFacts) {
	node := r.node
	health := ReadHealth(node)
	if dra != nil && !dra.Pending {
		entry.UnhealthyGpus = max(entry.UnhealthyGpus, dra.UnhealthyGpus)
	}
	if health.GPUFault && entry.UnhealthyGpus == 0 && entry.GpuCount > 0 {
		entry.UnhealthyGpus = 1 // at least one GPU; the monitor's message says which
	}
	if !entry.Ready {
		entry.Conditions = append(entry.Conditions, NodeNotReady)
	}
	if readyStatus(node) == corev1.ConditionUnknown || hasTaint(node, TaintUnreachable) {
		entry.Conditions = append(entry.Conditions, NodeUnreachable)
	}
	if entry.UnhealthyGpus > 0 {
		entry.Conditions = append(entry.Conditions, NodeUnhealthyGPUs)
	}
	if entry.MIG != nil && (entry.MIG.ConfigState == "failed" || strings.HasSuffix(entry.Product, "-MIG-INVALID")) {
		entry.Conditions = append(entry.Conditions, NodeMIGConfigFailed)
	}
	if node.Spec.Unschedulable {
		entry.Conditions = append(entry.Conditions, NodeCordoned)
	}
	if dra != nil && dra.Pending {
		entry.Conditions = append(entry.Conditions, NodeDevicesPending)
	}
	if dra != nil && !dra.Pending && dra.Tainted {
		entry.Conditions = append(entry.Conditions, NodeDeviceTainted)
	}
	entry.Conditions = append(entry.Conditions, health.Conditions...)
}

// devices fills an entry from a node's DRA slices; with GFD's labels there too, the slices
// win where they disagree (they are what the scheduler allocates from), with a warning.
func (r *reader) devices(entry *homelabv1.GpuNodeEntry, dra *DeviceFacts, labelled bool) {
	if labelled {
		r.disagree(LabelProduct, entry.Product, NormalizeProduct(entry.Product) != dra.Product && dra.Product != "",
			"the gpu.nvidia.com ResourceSlices publish product %q", dra.Product)
		r.disagree(LabelCount, r.node.Labels[LabelCount], entry.GpuCount != dra.GpuCount,
			"the gpu.nvidia.com ResourceSlices publish %d GPUs", dra.GpuCount)
		r.disagree(LabelMemory, r.node.Labels[LabelMemory], dra.GpuMemoryMiB != 0 && entry.GpuMemoryMiB != dra.GpuMemoryMiB,
			"the gpu.nvidia.com ResourceSlices publish %d MiB per GPU", dra.GpuMemoryMiB)
		r.disagree(LabelDriverFull, entry.DriverVersion, dra.DriverVersion != "" && entry.DriverVersion != "" && !sameVersion(entry.DriverVersion, dra.DriverVersion),
			"the gpu.nvidia.com ResourceSlices publish driver %s", dra.DriverVersion)
	}
	if dra.Product != "" {
		entry.Product = dra.Product
	}
	entry.GpuCount = dra.GpuCount
	if entry.GpuCount > MaxGpusPerNode {
		entry.GpuCount = MaxGpusPerNode
		entry.Warnings = append(entry.Warnings, fmt.Sprintf("the gpu.nvidia.com ResourceSlices publish %d GPUs: more than %d on one node is not physical; counted as %d", dra.GpuCount, MaxGpusPerNode, MaxGpusPerNode))
	}
	if dra.GpuMemoryMiB != 0 {
		entry.GpuMemoryMiB = dra.GpuMemoryMiB
	}
	entry.Family = firstNonEmpty(entry.Family, dra.Family)
	entry.ComputeCapability = firstNonEmpty(entry.ComputeCapability, dra.ComputeCapability)
	entry.DriverVersion = firstNonEmpty(dra.DriverVersion, entry.DriverVersion)
	entry.CudaVersion = firstNonEmpty(entry.CudaVersion, dra.CudaVersion)
	if len(dra.MIG) > 0 {
		if entry.MIG == nil {
			entry.MIG = &homelabv1.MigInfo{Capable: true}
		}
		entry.MIG.Devices = append([]homelabv1.MigDevice(nil), dra.MIG...)
	}
}

// disagree warns that a label says otherwise than the slices, which are used instead.
func (r *reader) disagree(label, value string, differs bool, format string, arg any) {
	if differs {
		r.warn(label, value, fmt.Sprintf(format, arg)+"; using the slices")
	}
}

// sameVersion compares dotted versions numerically: GFD writes 570.124.06, the DRA driver
// the semantic version 570.124.6.
func sameVersion(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	if len(pa) != len(pb) {
		return false
	}
	for i := range pa {
		x, errx := strconv.ParseUint(pa[i], 10, 64)
		y, erry := strconv.ParseUint(pb[i], 10, 64)
		if errx != nil || erry != nil || x != y {
			return false
		}
	}
	return true
}

// cloud fills an entry from managed-cloud labels: product, MIG partitions and sharing; the
// count is the capacity divided by what one GPU gives.
func (r *reader) cloud(entry *homelabv1.GpuNodeEntry, cloud CloudFacts) {
	entry.Product = cloud.Product
	clients := int32(1)
	if cloud.Sharing != nil {
		sharing := *cloud.Sharing
		entry.Sharing = &sharing
		clients = max(sharing.Replicas, 1)
	}
	entry.GpuCount = clampInt32(cloud.GPUs(int64(entry.Capacity)))
	if cloud.MIGProfile != "" {
		entry.MIG = &homelabv1.MigInfo{Capable: true, Strategy: "single",
			Devices: []homelabv1.MigDevice{{Profile: cloud.MIGProfile, Count: entry.Capacity / clients}}}
	}
	entry.Warnings = append(entry.Warnings, cloud.Warnings...)
}

func ceilDiv(n, d int32) int32 {
	if d <= 0 || n <= 0 {
		return max(n, 0)
	}
	return int32((int64(n) + int64(d) - 1) / int64(d))
}

// Bounds of one node's entry, so that no node can take more than a small share of the
// node list however many labels, or how long ones, it has.
const (
	maxEntryString   = 128 // any string field
	maxEntryWarnings = 8
	maxMIGDevices    = 16 // MIG profiles listed; real GPUs offer fewer than ten
)

// bound cuts an entry's strings and lists to the bounds above, saying what was left out.
func bound(e *homelabv1.GpuNodeEntry) {
	for _, s := range []*string{&e.Product, &e.WorkloadConfig, &e.Family, &e.ComputeCapability, &e.DriverVersion, &e.CudaVersion} {
		*s = Cut(*s, maxEntryString)
	}
	if e.Sharing != nil {
		e.Sharing.Strategy = Cut(e.Sharing.Strategy, maxEntryString)
	}
	if m := e.MIG; m != nil {
		for _, s := range []*string{&m.Strategy, &m.Config, &m.ConfigState} {
			*s = Cut(*s, maxEntryString)
		}
		if extra := len(m.Devices) - maxMIGDevices; extra > 0 {
			m.Devices = m.Devices[:maxMIGDevices]
			e.Warnings = append(e.Warnings, fmt.Sprintf("%d more MIG profiles not listed", extra))
		}
		for i := range m.Devices {
			m.Devices[i].Profile = Cut(m.Devices[i].Profile, maxEntryString)
		}
	}
	if extra := len(e.Warnings) - maxEntryWarnings; extra > 0 {
		e.Warnings = append(e.Warnings[:maxEntryWarnings-1], fmt.Sprintf("and %d more warnings", extra+1))
	}
	for i := range e.Warnings {
		e.Warnings[i] = Cut(e.Warnings[i], 2*maxEntryString)
	}
}

// MaxMessageBytes bounds a condition message that quotes user input (the CRD allows 32 KiB).
const MaxMessageBytes = 1024

// Cut shortens s to at most n bytes on a rune boundary, marking that it was cut.
func Cut(s string, n int) string {
	const marker = "...(cut)"
	if len(s) <= n {
		return s
	}
	end := n - len(marker)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + marker
}

// reader reads numeric labels of one node, collecting warnings.
type reader struct {
	node     *corev1.Node
	warnings []Warning
}

func (r *reader) warn(label, value, reason string) {
	r.warnings = append(r.warnings, Warning{Node: r.node.Name, Label: label, Value: value, Reason: reason})
}

// count reads a non-negative whole number that fits in bits; absent or malformed gives 0.
func (r *reader) count(label string, bits int) int64 {
	value, ok := r.node.Labels[label]
	if !ok {
		return 0
	}
	n, err := parseNonNegative(value, bits)
	if err != nil {
		r.warn(label, value, err.Error())
		return 0
	}
	return n
}

// MaxGpusPerNode is the most GPUs (or MIG devices, with the single strategy) one node is
// counted with: 16 GPUs of 7 MIG devices each fit with room to spare, and a kubelet that
// claims more cannot saturate the fleet's totals.
const MaxGpusPerNode = 256

// gpuCount reads the count label, capped at MaxGpusPerNode with a warning.
func (r *reader) gpuCount() int64 {
	n := r.count(LabelCount, 32)
	if n > MaxGpusPerNode {
		r.warn(LabelCount, r.node.Labels[LabelCount], fmt.Sprintf("more than %d GPUs on one node is not physical; counted as %d", MaxGpusPerNode, MaxGpusPerNode))
		return MaxGpusPerNode
	}
	return n
}

// mig reads the MIG labels and, for the mixed strategy, the per-profile device counts.
func (r *reader) mig() *homelabv1.MigInfo {
	lbl := r.node.Labels
	info := homelabv1.MigInfo{
		Capable:     lbl[LabelMIGCapable] == "true",
		Strategy:    lbl[LabelMIGStrategy],
		Config:      lbl[LabelMIGConfig],
		ConfigState: lbl[LabelMIGState],
	}
	profiles := map[string]*homelabv1.MigDevice{}
	device := func(profile string) *homelabv1.MigDevice {
		if profiles[profile] == nil {
			profiles[profile] = &homelabv1.MigDevice{Profile: profile}
		}
		return profiles[profile]
	}
	var keys []string
	for key := range lbl {
		if strings.HasPrefix(key, labelMIGProfilePfx) {
			keys = append(keys, key)
		}
	}
	// In key order: the warnings for malformed values, and so the entry's hash, are the same
	// on every parse.
	slices.Sort(keys)
	for _, key := range keys {
		rest := strings.TrimPrefix(key, labelMIGProfilePfx)
		switch {
		case strings.HasSuffix(rest, ".count"):
			device(strings.TrimSuffix(rest, ".count")).Count = int32(r.count(key, 32))
		case strings.HasSuffix(rest, ".memory"):
			device(strings.TrimSuffix(rest, ".memory")).MemoryMiB = r.count(key, 64)
		}
	}
	// Without GFD's per-profile labels, the device plugin's resources still tell the counts.
	for name, q := range r.node.Status.Capacity {
		if profile, ok := strings.CutPrefix(string(name), labelMIGProfilePfx); ok {
			if d := device(profile); d.Count == 0 {
				d.Count = clampInt32(q.Value())
			}
		}
	}
	for _, d := range profiles {
		if d.Count > 0 {
			info.Devices = append(info.Devices, *d)
		}
	}
	slices.SortFunc(info.Devices, func(a, b homelabv1.MigDevice) int { return strings.Compare(a.Profile, b.Profile) })
	if !info.Capable && info.Strategy == "" && info.Config == "" && info.ConfigState == "" && len(info.Devices) == 0 {
		return nil
	}
	return &info
}

// checkCapacity warns when the GPU count label contradicts the advertised capacity.
func (r *reader) checkCapacity(entry homelabv1.GpuNodeEntry, replicas int32) {
	if entry.GpuCount == 0 || entry.Capacity == 0 || entry.MIG != nil && entry.MIG.Strategy != "" {
		return
	}
	want := int64(entry.GpuCount)
	if replicas > 1 {
		want *= int64(replicas)
	}
	if int64(entry.Capacity) != want {
		r.warn(LabelCount, r.node.Labels[LabelCount],
			fmt.Sprintf("contradicts nvidia.com/gpu capacity %d (expected %d)", entry.Capacity, want))
	}
}

func hasTaint(node *corev1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// version joins the non-empty leading parts with dots: ("12", "8") -> "12.8", ("570", "",
// "") -> "570". Parts stay strings: revisions can have leading zeros ("06").
func version(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p == "" {
			break
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, ".")
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

func clampInt32(v int64) int32 {
	switch {
	case v < 0:
		return 0
	case v > int64(^uint32(0)>>1):
		return int32(^uint32(0) >> 1)
	}
	return int32(v)
}

// parseNonNegative reads a decimal whole number that fits in bits and is not negative.
func parseNonNegative(value string, bits int) (int64, error) {
	n, err := strconv.ParseInt(value, 10, bits)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("out of range for a %d-bit count", bits)
	case err != nil:
		return 0, fmt.Errorf("not a whole number")
	case n < 0:
		return 0, fmt.Errorf("negative")
	}
	return n, nil
}

// ReportFields keeps only the fields the first version of the operator reported (name,
// ready, product, count, memory, workload), for comparisons with its report.
func ReportFields(entries []homelabv1.GpuNodeEntry) []homelabv1.GpuNodeEntry {
	out := make([]homelabv1.GpuNodeEntry, len(entries))
	for i, e := range entries {
		out[i] = homelabv1.GpuNodeEntry{Name: e.Name, Ready: e.Ready, Product: e.Product, GpuCount: e.GpuCount,
			GpuMemoryMiB: e.GpuMemoryMiB, WorkloadConfig: e.WorkloadConfig}
	}
	return out
}
