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
	"fmt"
	"math"
	"strconv"
	"strings"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Labels that managed clouds put on GPU nodes. GKE writes its accelerator label and, for
// partitioned or shared GPUs, the partition size, sharing strategy and clients per GPU
// (cloud.google.com/kubernetes-engine/docs/how-to/gpus-multi, concepts/timesharing-gpus).
// The cluster-autoscaler's AWS provider, and EKS node groups that follow it, name the GPU
// model in k8s.amazonaws.com/accelerator; its values are whatever the node group says.
const (
	LabelGKEAccelerator      = "cloud.google.com/gke-accelerator"
	LabelGKEPartitionSize    = "cloud.google.com/gke-gpu-partition-size"
	LabelGKESharingStrategy  = "cloud.google.com/gke-gpu-sharing-strategy"
	LabelGKEMaxSharedClients = "cloud.google.com/gke-max-shared-clients-per-gpu"
	LabelAWSAccelerator      = "k8s.amazonaws.com/accelerator"
)

// Sharing strategies as GKE names them, and as GpuSharing.Strategy says them (GFD's words).
const (
	gkeTimeSharing     = "time-sharing"
	gkeMPS             = "mps"
	sharingTimeSlicing = "time-slicing"
	sharingMPS         = "mps"
)

// maxSharedClients bounds clients per GPU: GKE allows at most 48; anything far beyond is no
// real setting, and the count divides by it.
const maxSharedClients = 1024

// CloudFacts is what managed-cloud labels say of a node's GPUs when GPU Feature Discovery is
// absent. The GPU count is not among them: it is the nvidia.com/gpu capacity divided by what
// one GPU gives (see GPUs).
type CloudFacts struct {
	Source  string // homelabv1.SourceGKE or homelabv1.SourceAcceleratorLabel
	Product string // normalised to GFD's label form, one model per physical GPU ("" when unnamed)
	// MIGProfile is GKE's partition size, e.g. 1g.5gb ("" when not partitioned).
	MIGProfile string
	// PartitionsPerGPU is how many such partitions one GPU gives (1 when not partitioned).
	PartitionsPerGPU int32
	// Sharing is GKE's sharing strategy (time-slicing or mps, in GFD's words) and clients per
	// GPU (Replicas); nil when GPUs are not shared.
	Sharing  *homelabv1.GpuSharing
	Warnings []string // labels that could not be read, as label="value": reason
}

// GPUs returns the physical GPUs behind an nvidia.com/gpu capacity: each GPU is advertised
// once per partition and once per sharing client, so a partly used GPU still counts.
func (f CloudFacts) GPUs(capacity int64) int64 {
	divisor := int64(max(f.PartitionsPerGPU, 1))
	if f.Sharing != nil {
		divisor *= int64(max(f.Sharing.Replicas, 1))
	}
	if capacity <= 0 {
		return 0
	}
	n := capacity / divisor
	if capacity%divisor != 0 {
		n++
	}
	return n
}

// IsCloudGPULabel reports whether ReadCloudLabels reads label key.
func IsCloudGPULabel(key string) bool {
	switch key {
	case LabelGKEAccelerator, LabelGKEPartitionSize, LabelGKESharingStrategy, LabelGKEMaxSharedClients, LabelAWSAccelerator:
		return true
	}
	return false
}

// HasCloudAccelerator reports whether a managed cloud labelled the node as carrying GPUs
// (what ReadCloudLabels needs to say anything), without reading the values.
func HasCloudAccelerator(labels map[string]string) bool {
	_, gke := labels[LabelGKEAccelerator]
	_, aws := labels[LabelAWSAccelerator]
	return gke || aws
}

// ReadCloudLabels reads the managed-cloud GPU labels; false when the node has no accelerator
// label (partition and sharing labels alone say nothing). GKE's label wins over the
// autoscaler's. Malformed values are left out with a warning.
func ReadCloudLabels(labels map[string]string) (CloudFacts, bool) {
	facts := CloudFacts{PartitionsPerGPU: 1}
	accelerator, gke := labels[LabelGKEAccelerator]
	key := LabelGKEAccelerator
	facts.Source = homelabv1.SourceGKE
	if !gke {
		var ok bool
		if accelerator, ok = labels[LabelAWSAccelerator]; !ok {
			return CloudFacts{}, false
		}
		key = LabelAWSAccelerator
		facts.Source = homelabv1.SourceAcceleratorLabel
	}
	facts.Product = ProductFromAccelerator(accelerator)
	if facts.Product == "" && !isPlaceholder(accelerator) {
		facts.warn(key, accelerator, "names no GPU model")
	}
	if !gke {
		return facts, true
	}
	if size, ok := labels[LabelGKEPartitionSize]; ok {
		if n, err := partitionsPerGPU(size, productMemoryGB[facts.Product]); err != nil {
			facts.warn(LabelGKEPartitionSize, size, err.Error())
		} else {
			facts.MIGProfile, facts.PartitionsPerGPU = size, n
		}
	}
	facts.Sharing = facts.readSharing(labels)
	return facts, true
}

// readSharing reads GKE's sharing strategy and clients per GPU. GKE shares by time when
// clients are set without a strategy.
func (f *CloudFacts) readSharing(labels map[string]string) *homelabv1.GpuSharing {
	strategy, hasStrategy := labels[LabelGKESharingStrategy]
	clients, hasClients := labels[LabelGKEMaxSharedClients]
	if !hasStrategy && !hasClients {
		return nil
	}
	sharing := &homelabv1.GpuSharing{}
	switch strategy {
	case gkeTimeSharing:
		sharing.Strategy = sharingTimeSlicing
	case gkeMPS:
		sharing.Strategy = sharingMPS
	case "":
		sharing.Strategy = sharingTimeSlicing
	default:
		f.warn(LabelGKESharingStrategy, strategy, "not time-sharing or mps")
		sharing.Strategy = Cut(strategy, maxEntryString)
	}
	if hasClients {
		n, err := strconv.ParseInt(clients, 10, 32)
		switch {
		case err != nil:
			f.warn(LabelGKEMaxSharedClients, clients, "not a whole number")
		case n < 1 || n > maxSharedClients:
			f.warn(LabelGKEMaxSharedClients, clients, fmt.Sprintf("not between 1 and %d", maxSharedClients))
		default:
			sharing.Replicas = int32(n)
		}
	}
	if sharing.Replicas <= 1 && !hasStrategy {
		return nil // one client per GPU and no strategy: nothing is shared
	}
	return sharing
}

func (f *CloudFacts) warn(label, value, reason string) {
	f.Warnings = append(f.Warnings, fmt.Sprintf("%s=%q: %s", label, Cut(value, maxEntryString), reason))
}

// isPlaceholder: EKS node groups often label k8s.amazonaws.com/accelerator "true" only to tell
// the autoscaler a node will carry a GPU; the value names no model, and that is no mistake.
func isPlaceholder(value string) bool { return value == "true" }

// acceleratorProducts maps the model part of an accelerator label value (lower case, without
// the nvidia-, tesla- or ampere- prefixes) to GPU Feature Discovery's nvidia.com/gpu.product
// for that model. Keys are GKE's accelerator types (Compute Engine's GPU names: nvidia-tesla-t4,
// nvidia-a100-80gb, nvidia-h100-mega-80gb, nvidia-h200-141gb, nvidia-b200, nvidia-gb200, ...)
// and the values EKS node groups use (nvidia-tesla-a10, nvidia-tesla-a100e, nvidia-ampere-a100,
// L4, NVIDIA-A10G). Where a model came in several boards, the one the cloud offers is named:
// Compute Engine's and EC2's V100 are SXM2 16 GB, Compute Engine's P100 is PCIe 16 GB.
var acceleratorProducts = map[string]string{
	"k80":            "Tesla-K80",
	"m60":            "Tesla-M60",
	"p4":             "Tesla-P4",
	"p100":           "Tesla-P100-PCIE-16GB",
	"v100":           "Tesla-V100-SXM2-16GB",
	"t4":             "Tesla-T4",
	"t4g":            "NVIDIA-T4G",
	"a10":            "NVIDIA-A10",
	"a10g":           "NVIDIA-A10G",
	"a100":           "NVIDIA-A100-SXM4-40GB",
	"a100-40gb":      "NVIDIA-A100-SXM4-40GB",
	"a100-80gb":      "NVIDIA-A100-SXM4-80GB",
	"a100e":          "NVIDIA-A100-SXM4-80GB", // EC2 p4de
	"l4":             "NVIDIA-L4",
	"l40s":           "NVIDIA-L40S",
	"h100":           "NVIDIA-H100-80GB-HBM3",
	"h100-80gb":      "NVIDIA-H100-80GB-HBM3",
	"h100-mega":      "NVIDIA-H100-80GB-HBM3", // A3 Mega: the same GPU, more network
	"h100-mega-80gb": "NVIDIA-H100-80GB-HBM3",
	"h200":           "NVIDIA-H200",
	"h200-141gb":     "NVIDIA-H200",
	"b200":           "NVIDIA-B200",
	"gb200":          "NVIDIA-GB200",
	"gb300":          "NVIDIA-GB300",
	"rtx-pro-6000":   "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
}

// productMemoryGB is the memory of the MIG-capable GPUs, which says how many memory slices
// (eighths) a partition takes.
var productMemoryGB = map[string]int{
	"NVIDIA-A100-SXM4-40GB": 40,
	"NVIDIA-A100-SXM4-80GB": 80,
	"NVIDIA-H100-80GB-HBM3": 80,
	"NVIDIA-H200":           141,
	"NVIDIA-B200":           180,
}

// ProductFromAccelerator returns GFD's product name for a managed cloud's accelerator label
// value: "nvidia-tesla-t4" gives "Tesla-T4", "nvidia-h100-80gb" "NVIDIA-H100-80GB-HBM3". A
// value it does not know is kept as given, so the model stays recognisable; "" and the
// placeholder "true" give "".
func ProductFromAccelerator(value string) string {
	value = strings.TrimSpace(value)
	if value == "" || isPlaceholder(value) {
		return ""
	}
	model := strings.ToLower(value)
	model = strings.TrimSuffix(model, "-vws") // Compute Engine's virtual-workstation variants
	for _, prefix := range []string{"nvidia-", "tesla-", "ampere-"} {
		model = strings.TrimPrefix(model, prefix)
	}
	if product, ok := acceleratorProducts[model]; ok {
		return product
	}
	return Cut(value, maxEntryString)
}

// MIG geometry of A100, H100, H200 and B200: seven compute slices and eight memory slices.
const (
	migComputeSlices = 7
	migMemorySlices  = 8
)

// partitionsPerGPU returns how many partitions of GKE's size ("<compute>g.<memory>gb") one GPU
// gives: seven 1g, three 2g, two 3g, one 4g or 7g. A 1g partition with twice the smallest
// memory (1g.10gb on a 40 GB A100, 1g.20gb on an 80 GB GPU) takes two memory slices, so a
// GPU gives four; gpuMemoryGB (0: unknown) says which it is.
func partitionsPerGPU(size string, gpuMemoryGB int) (int32, error) {
	compute, memory, ok := strings.Cut(size, "g.")
	if !ok || !strings.HasSuffix(memory, "gb") {
		return 0, fmt.Errorf("not a partition size like 1g.5gb")
	}
	c, err1 := strconv.Atoi(compute)
	m, err2 := strconv.Atoi(strings.TrimSuffix(memory, "gb"))
	if err1 != nil || err2 != nil || c < 1 || m < 1 {
		return 0, fmt.Errorf("not a partition size like 1g.5gb")
	}
	switch {
	case c > migComputeSlices:
		return 0, fmt.Errorf("more than %d compute slices", migComputeSlices)
	case c == 1:
		if gpuMemoryGB > 0 {
			slices := int(math.Round(float64(m) * migMemorySlices / float64(gpuMemoryGB)))
			if slices > 1 {
				return int32(max(migMemorySlices/slices, 1)), nil
			}
		}
		return migComputeSlices, nil
	case c == 2:
		return 3, nil
	case c == 3:
		return 2, nil
	}
	return 1, nil // one partition of four or more compute slices fills a GPU
}
