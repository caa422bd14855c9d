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

package allocation

import (
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/saturating"
)

// defaultSlicesPerGPU is the number of MIG compute slices of most GPUs (A100, H100, B200).
const defaultSlicesPerGPU = 7

func slicesPerGPU(s Shape) int64 {
	if s.SlicesPerGPU > 0 {
		return int64(s.SlicesPerGPU)
	}
	return defaultSlicesPerGPU
}

// profileSlices is the number of compute slices a MIG profile takes: the number before
// its "g" (3g.20gb: 3), at most perGPU; 1 when the profile does not start that way.
func profileSlices(profile string, perGPU int64) int64 {
	n, i := int64(0), 0
	for ; i < len(profile) && i < 4 && profile[i] >= '0' && profile[i] <= '9'; i++ {
		n = n*10 + int64(profile[i]-'0')
	}
	if i == 0 || i >= len(profile) || profile[i] != 'g' || n == 0 {
		return 1
	}
	return min(n, perGPU)
}

// MilliOf is what count units of a device-plugin resource are worth on a node of this shape,
// in thousandths of a GPU: nvidia.com/gpu a whole GPU (a MIG device under the single
// strategy, a 1/Replicas share under time-slicing without renaming), nvidia.com/gpu.shared
// 1/Replicas, nvidia.com/mig-<profile> its slices out of SlicesPerGPU. Other resources: 0.
func MilliOf(resource string, count int64, s Shape) int64 {
	count = max(count, 0)
	perGPU := slicesPerGPU(s)
	replicas := max(int64(s.Replicas), 1)
	switch {
	case resource == ResourceGPU && s.SingleMIGProfile != "":
		return saturating.Mul(count, profileSlices(s.SingleMIGProfile, perGPU)*1000) / perGPU
	case resource == ResourceGPU:
		return saturating.Mul(count, 1000) / replicas
	case resource == ResourceGPUShared:
		return saturating.Mul(count, 1000) / replicas
	case IsGPUResource(resource):
		return saturating.Mul(count, profileSlices(resource[len(ResourceMIGPrefix):], perGPU)*1000) / perGPU
	}
	return 0
}

// wholeGPUs reports whether units of the resource are whole GPUs on a node of this shape.
func wholeGPUs(resource string, s Shape) bool {
	return resource == ResourceGPU && s.SingleMIGProfile == "" && s.Replicas <= 1
}

// DeviceShare is the GPU a DRA device of the NVIDIA driver is on and what the device is worth
// in thousandths of a GPU: gpu-<n> is a whole GPU, gpu-<n>-mig-<g>g... a MIG device of
// gpu-<n> worth g slices; any other name counts as a whole GPU of its own.
func DeviceShare(device string, s Shape) (parent string, milli int64) {
	rest, ok := strings.CutPrefix(device, "gpu-")
	if !ok {
		return device, 1000
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	profile, ok := strings.CutPrefix(rest[n:], "-mig-")
	if n == 0 || !ok {
		return device, 1000
	}
	perGPU := slicesPerGPU(s)
	return device[:len("gpu-")+n], profileSlices(profile, perGPU) * 1000 / perGPU
}

// GPUIndex is n for the NVIDIA driver's whole-GPU device gpu-<n> with n < 64.
func GPUIndex(device string) (int, bool) {
	rest, ok := strings.CutPrefix(device, "gpu-")
	if !ok || rest == "" || len(rest) > 2 {
		return 0, false
	}
	n := 0
	for _, c := range []byte(rest) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n < 64 && (n == 0 || rest[0] != '0')
}

// HeldGPUs has bit n set when a held device is gpu-<n> or one of its MIG devices.
func (h *Held) HeldGPUs() uint64 {
	var bits uint64
	if h == nil {
		return 0
	}
	for i := range h.Namespaces {
		for _, d := range h.Namespaces[i].Devices {
			parent, _ := DeviceShare(d, Shape{})
			if n, ok := GPUIndex(parent); ok {
				bits |= 1 << n
			}
		}
	}
	return bits
}

// GPUs is what the node's pods hold, as GPUs touched and as thousandths of a GPU.
func (h *Held) GPUs(s Shape) (gpus int32, milli int64) {
	if h == nil {
		return 0, 0
	}
	sum := map[string]int64{}
	var devices []string
	for i := range h.Namespaces {
		addTo(sum, h.Namespaces[i].Resources)
		devices = append(devices, h.Namespaces[i].Devices...)
	}
	return gpusOf(sum, devices, s)
}

// GPUs is what the namespace's pods hold on the node, as GPUs touched and as thousandths of
// a GPU.
func (n *NamespaceHeld) GPUs(s Shape) (int32, int64) {
	if n == nil {
		return 0, 0
	}
	sum := map[string]int64{}
	addTo(sum, n.Resources)
	return gpusOf(sum, n.Devices, s)
}

// NamespaceMilli is each namespace's share of what the node's pods hold, in thousandths of a
// GPU and in the order of h.Namespaces. Parts of GPUs round once for the node, so the shares
// are the namespaces' own figures apportioned by largest remainder to add up to the node's.
func (h *Held) NamespaceMilli(s Shape) []int64 {
	if h == nil {
		return nil
	}
	_, total := h.GPUs(s)
	parts := make([]int64, len(h.Namespaces))
	for i := range h.Namespaces {
		_, parts[i] = h.Namespaces[i].GPUs(s)
	}
	return Apportion(total, parts)
}

// Apportion scales parts to add up to total: each gets floor(part*total/sum), and what is
// left goes one each to the largest remainders (the earlier part on a tie). Without any
// part above zero, total is spread evenly.
func Apportion(total int64, parts []int64) []int64 {
	var sum int64
	for _, p := range parts {
		sum = saturating.Add(sum, max(p, 0))
	}
	if sum == total || len(parts) == 0 || total < 0 {
		return parts
	}
	out := make([]int64, len(parts))
	rem := make([]uint64, len(parts))
	left := total
	for i, p := range parts {
		if sum == 0 {
			out[i] = total / int64(len(parts))
		} else {
			hi, lo := bits.Mul64(uint64(max(p, 0)), uint64(total))
			q, r := bits.Div64(hi, lo, uint64(sum)) // hi < sum: each part is at most sum
			out[i], rem[i] = int64(q), r
		}
		left -= out[i]
	}
	order := make([]int, len(parts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case rem[a] > rem[b]:
			return -1
		case rem[a] < rem[b]:
			return 1
		}
		return 0
	})
	for i := 0; left > 0; i = (i + 1) % len(order) {
		out[order[i]]++
		left--
	}
	return out
}

// gpusOf counts whole device-plugin GPUs one each, DRA devices one per distinct physical GPU
// and device-plugin parts of GPUs rounded up to whole GPUs; milli is the exact sum. Both are
// capped at the node's GPUs when known.
func gpusOf(resources map[string]int64, devices []string, s Shape) (int32, int64) {
	var whole, partial, milli int64
	for name, count := range resources {
		if wholeGPUs(name, s) {
			whole = saturating.Add(whole, max(count, 0))
			continue
		}
		partial = saturating.Add(partial, MilliOf(name, count, s))
	}
	parents := map[string]struct{}{}
	seen := map[string]struct{}{}
	for _, d := range devices {
		if _, dup := seen[d]; dup {
			continue
		}
		seen[d] = struct{}{}
		parent, m := DeviceShare(d, s)
		parents[parent] = struct{}{}
		milli = saturating.Add(milli, m)
	}
	gpus := saturating.Add(saturating.Add(whole, int64(len(parents))), partial/1000)
	if partial%1000 != 0 {
		gpus = saturating.Add(gpus, 1)
	}
	milli = saturating.Add(saturating.Add(milli, saturating.Mul(whole, 1000)), partial)
	if s.GPUs > 0 {
		gpus = min(gpus, int64(s.GPUs))
		milli = min(milli, int64(s.GPUs)*1000)
	}
	return int32(min(gpus, math.MaxInt32)), milli
}
