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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// The accelerator values GKE and EKS node groups really write give GPU Feature Discovery's
// product name, so a cloud node and a GFD node of one model fall under one model.
func TestProductFromAccelerator(t *testing.T) {
	for value, want := range map[string]string{
		// GKE (Compute Engine accelerator types)
		"nvidia-tesla-k80":      "Tesla-K80",
		"nvidia-tesla-p4":       "Tesla-P4",
		"nvidia-tesla-p4-vws":   "Tesla-P4",
		"nvidia-tesla-p100":     "Tesla-P100-PCIE-16GB",
		"nvidia-tesla-v100":     "Tesla-V100-SXM2-16GB",
		"nvidia-tesla-t4":       "Tesla-T4",
		"nvidia-tesla-a100":     "NVIDIA-A100-SXM4-40GB",
		"nvidia-a100-80gb":      "NVIDIA-A100-SXM4-80GB",
		"nvidia-l4":             "NVIDIA-L4",
		"nvidia-h100-80gb":      "NVIDIA-H100-80GB-HBM3",
		"nvidia-h100-mega-80gb": "NVIDIA-H100-80GB-HBM3",
		"nvidia-h200-141gb":     "NVIDIA-H200",
		"nvidia-b200":           "NVIDIA-B200",
		"nvidia-gb200":          "NVIDIA-GB200",
		"nvidia-rtx-pro-6000":   "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
		// EKS node groups (the cluster-autoscaler's label, free-form)
		"nvidia-tesla-a10":   "NVIDIA-A10",
		"nvidia-tesla-a100e": "NVIDIA-A100-SXM4-80GB",
		"nvidia-ampere-a100": "NVIDIA-A100-SXM4-40GB",
		"NVIDIA-A10G":        "NVIDIA-A10G",
		"L4":                 "NVIDIA-L4",
		"nvidia-l40s":        "NVIDIA-L40S",
		// unknown models are kept as given; a placeholder names none
		"nvidia-tesla-g5": "nvidia-tesla-g5",
		"amd-mi300x":      "amd-mi300x",
		"true":            "",
		"":                "",
	} {
		if got := ProductFromAccelerator(value); got != want {
			t.Errorf("ProductFromAccelerator(%q) = %q, want %q", value, got, want)
		}
	}
	if got := ProductFromAccelerator(strings.Repeat("x", 1000)); len(got) > maxEntryString {
		t.Errorf("a 1000-byte value is kept at %d bytes; want at most %d", len(got), maxEntryString)
	}
}

// What a user sees of a managed-cloud node without GFD: the model, the MIG partitions and
// sharing, and how many physical GPUs the nvidia.com/gpu capacity stands for.
func TestReadCloudLabels(t *testing.T) {
	const (
		acc  = LabelGKEAccelerator
		size = LabelGKEPartitionSize
		strg = LabelGKESharingStrategy
		clnt = LabelGKEMaxSharedClients
	)
	tests := []struct {
		name     string
		labels   map[string]string
		capacity int64 // nvidia.com/gpu
		want     CloudFacts
		gpus     int64
	}{{
		name:     "GKE T4 node",
		labels:   map[string]string{acc: "nvidia-tesla-t4", "cloud.google.com/gke-nodepool": "gpu-pool"},
		capacity: 4,
		want:     CloudFacts{Source: homelabv1.SourceGKE, Product: "Tesla-T4", PartitionsPerGPU: 1},
		gpus:     4,
	}, {
		name:     "GKE A100 40GB in 1g.5gb partitions: seven per GPU",
		labels:   map[string]string{acc: "nvidia-tesla-a100", size: "1g.5gb"},
		capacity: 14,
		want:     CloudFacts{Source: homelabv1.SourceGKE, Product: "NVIDIA-A100-SXM4-40GB", MIGProfile: "1g.5gb", PartitionsPerGPU: 7},
		gpus:     2,
	}, {
		name:     "GKE A100 40GB in 1g.10gb partitions: two memory slices each, four per GPU",
		labels:   map[string]string{acc: "nvidia-tesla-a100", size: "1g.10gb"},
		capacity: 8,
		want:     CloudFacts{Source: homelabv1.SourceGKE, Product: "NVIDIA-A100-SXM4-40GB", MIGProfile: "1g.10gb", PartitionsPerGPU: 4},
		gpus:     2,
	}, {
		name:     "GKE A100 80GB in 1g.10gb partitions: seven per GPU",
		labels:   map[string]string{acc: "nvidia-a100-80gb", size: "1g.10gb"},
		capacity: 56,
		want:     CloudFacts{Source: homelabv1.SourceGKE, Product: "NVIDIA-A100-SXM4-80GB", MIGProfile: "1g.10gb", PartitionsPerGPU: 7},
		gpus:     8,
	}, {
		name:     "GKE H100 in 2g.20gb partitions, one GPU partly allocated still counts",
		labels:   map[string]string{acc: "nvidia-h100-80gb", size: "2g.20gb"},
		capacity: 5,
		want:     CloudFacts{Source: homelabv1.SourceGKE, Product: "NVIDIA-H100-80GB-HBM3", MIGProfile: "2g.20gb", PartitionsPerGPU: 3},
		gpus:     2,
	}, {
		name:     "GKE H200 in 3g.71gb partitions",
		labels:   map[string]string{acc: "nvidia-h200-141gb", size: "3g.71gb"},
		capacity: 16,
		want:     CloudFacts{Source: homelabv1.SourceGKE, Product: "NVIDIA-H200", MIGProfile: "3g.71gb", PartitionsPerGPU: 2},
		gpus:     8,
	}, {
		name:     "GKE H200 in 1g.35gb partitions: four per GPU",
		labels:   map[string]string{acc: "nvidia-h200-141gb", size: "1g.35gb"},
		capacity: 32,
		want:     CloudFacts{Source: homelabv1.SourceGKE, Product: "NVIDIA-H200", MIGProfile: "1g.35gb", PartitionsPerGPU: 4},
		gpus:     8,
	}, {
		name:     "GKE whole-GPU partitions",
		labels:   map[string]string{acc: "nvidia-tesla-a100", size: "7g.40gb"},
		capacity: 8,
		want:     CloudFacts{Source: homelabv1.SourceGKE, Product: "NVIDIA-A100-SXM4-40GB", MIGProfile: "7g.40gb", PartitionsPerGPU: 1},
		gpus:     8,
	}, {
		name:     "GKE time-sharing, three clients per GPU",
		labels:   map[string]string{acc: "nvidia-l4", strg: "time-sharing", clnt: "3"},
		capacity: 6,
		want: CloudFacts{Source: homelabv1.SourceGKE, Product: "NVIDIA-L4", PartitionsPerGPU: 1,
			Sharing: &homelabv1.GpuSharing{Strategy: "time-slicing", Replicas: 3}},
		gpus: 2,
	}, {
		name:     "GKE MPS",
		labels:   map[string]string{acc: "nvidia-tesla-t4", strg: "mps", clnt: "48"},
		capacity: 48,
		want: CloudFacts{Source: homelabv1.SourceGKE, Product: "Tesla-T4", PartitionsPerGPU: 1,
			Sharing: &homelabv1.GpuSharing{Strategy: "mps", Replicas: 48}},
		gpus: 1,
	}, {
		name:     "GKE time-sharing on MIG partitions",
		labels:   map[string]string{acc: "nvidia-tesla-a100", size: "1g.5gb", strg: "time-sharing", clnt: "2"},
		capacity: 28,
		want: CloudFacts{Source: homelabv1.SourceGKE, Product: "NVIDIA-A100-SXM4-40GB", MIGProfile: "1g.5gb", PartitionsPerGPU: 7,
			Sharing: &homelabv1.GpuSharing{Strategy: "time-slicing", Replicas: 2}},
		gpus: 2,
	}, {
		name:     "GKE clients without a strategy share by time",
		labels:   map[string]string{acc: "nvidia-tesla-t4", clnt: "4"},
		capacity: 4,
		want: CloudFacts{Source: homelabv1.SourceGKE, Product: "Tesla-T4", PartitionsPerGPU: 1,
			Sharing: &homelabv1.GpuSharing{Strategy: "time-slicing", Replicas: 4}},
		gpus: 1,
	}, {
		name:     "EKS accelerator label",
		labels:   map[string]string{LabelAWSAccelerator: "nvidia-tesla-t4", "eks.amazonaws.com/nodegroup": "gpu"},
		capacity: 1,
		want:     CloudFacts{Source: homelabv1.SourceAcceleratorLabel, Product: "Tesla-T4", PartitionsPerGPU: 1},
		gpus:     1,
	}, {
		name:     "EKS placeholder value: a GPU node of no named model, no warning",
		labels:   map[string]string{LabelAWSAccelerator: "true"},
		capacity: 8,
		want:     CloudFacts{Source: homelabv1.SourceAcceleratorLabel, PartitionsPerGPU: 1},
		gpus:     8,
	}, {
		name:     "GKE's label wins over the autoscaler's",
		labels:   map[string]string{acc: "nvidia-l4", LabelAWSAccelerator: "nvidia-tesla-t4"},
		capacity: 1,
		want:     CloudFacts{Source: homelabv1.SourceGKE, Product: "NVIDIA-L4", PartitionsPerGPU: 1},
		gpus:     1,
	}, {
		name:     "capacity not yet advertised",
		labels:   map[string]string{acc: "nvidia-l4"},
		capacity: 0,
		want:     CloudFacts{Source: homelabv1.SourceGKE, Product: "NVIDIA-L4", PartitionsPerGPU: 1},
		gpus:     0,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ReadCloudLabels(tt.labels)
			if !ok || !HasCloudAccelerator(tt.labels) {
				t.Fatal("no cloud labels found")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("facts (-want +got):\n%s", diff)
			}
			if n := got.GPUs(tt.capacity); n != tt.gpus {
				t.Errorf("nvidia.com/gpu %d stands for %d GPUs, want %d", tt.capacity, n, tt.gpus)
			}
		})
	}
}

// Malformed values are left out with a warning naming the label; the rest is still read.
func TestReadCloudLabelsMalformed(t *testing.T) {
	tests := []struct {
		name    string
		labels  map[string]string
		want    CloudFacts
		warning string
	}{{
		name:    "partition size not of the form",
		labels:  map[string]string{LabelGKEAccelerator: "nvidia-tesla-a100", LabelGKEPartitionSize: "abc"},
		want:    CloudFacts{Source: homelabv1.SourceGKE, Product: "NVIDIA-A100-SXM4-40GB", PartitionsPerGPU: 1},
		warning: `cloud.google.com/gke-gpu-partition-size="abc": not a partition size like 1g.5gb`,
	}, {
		name:    "partition of more compute slices than a GPU has",
		labels:  map[string]string{LabelGKEAccelerator: "nvidia-tesla-a100", LabelGKEPartitionSize: "8g.40gb"},
		want:    CloudFacts{Source: homelabv1.SourceGKE, Product: "NVIDIA-A100-SXM4-40GB", PartitionsPerGPU: 1},
		warning: `cloud.google.com/gke-gpu-partition-size="8g.40gb": more than 7 compute slices`,
	}, {
		name:    "zero-slice partition",
		labels:  map[string]string{LabelGKEAccelerator: "nvidia-tesla-a100", LabelGKEPartitionSize: "0g.0gb"},
		want:    CloudFacts{Source: homelabv1.SourceGKE, Product: "NVIDIA-A100-SXM4-40GB", PartitionsPerGPU: 1},
		warning: `cloud.google.com/gke-gpu-partition-size="0g.0gb": not a partition size like 1g.5gb`,
	}, {
		name:   "clients not a number",
		labels: map[string]string{LabelGKEAccelerator: "nvidia-tesla-t4", LabelGKESharingStrategy: "time-sharing", LabelGKEMaxSharedClients: "1.5"},
		want: CloudFacts{Source: homelabv1.SourceGKE, Product: "Tesla-T4", PartitionsPerGPU: 1,
			Sharing: &homelabv1.GpuSharing{Strategy: "time-slicing"}},
		warning: `cloud.google.com/gke-max-shared-clients-per-gpu="1.5": not a whole number`,
	}, {
		name:    "clients overflowing",
		labels:  map[string]string{LabelGKEAccelerator: "nvidia-tesla-t4", LabelGKEMaxSharedClients: "99999999999999999999"},
		want:    CloudFacts{Source: homelabv1.SourceGKE, Product: "Tesla-T4", PartitionsPerGPU: 1},
		warning: `cloud.google.com/gke-max-shared-clients-per-gpu="99999999999999999999": not a whole number`,
	}, {
		name:    "clients beyond any real setting",
		labels:  map[string]string{LabelGKEAccelerator: "nvidia-tesla-t4", LabelGKEMaxSharedClients: "5000"},
		want:    CloudFacts{Source: homelabv1.SourceGKE, Product: "Tesla-T4", PartitionsPerGPU: 1},
		warning: `cloud.google.com/gke-max-shared-clients-per-gpu="5000": not between 1 and 1024`,
	}, {
		name:    "clients zero",
		labels:  map[string]string{LabelGKEAccelerator: "nvidia-tesla-t4", LabelGKEMaxSharedClients: "0"},
		want:    CloudFacts{Source: homelabv1.SourceGKE, Product: "Tesla-T4", PartitionsPerGPU: 1},
		warning: `cloud.google.com/gke-max-shared-clients-per-gpu="0": not between 1 and 1024`,
	}, {
		name:   "unknown sharing strategy kept as given",
		labels: map[string]string{LabelGKEAccelerator: "nvidia-tesla-t4", LabelGKESharingStrategy: "fractional", LabelGKEMaxSharedClients: "2"},
		want: CloudFacts{Source: homelabv1.SourceGKE, Product: "Tesla-T4", PartitionsPerGPU: 1,
			Sharing: &homelabv1.GpuSharing{Strategy: "fractional", Replicas: 2}},
		warning: `cloud.google.com/gke-gpu-sharing-strategy="fractional": not time-sharing or mps`,
	}, {
		name:    "empty accelerator",
		labels:  map[string]string{LabelAWSAccelerator: ""},
		want:    CloudFacts{Source: homelabv1.SourceAcceleratorLabel, PartitionsPerGPU: 1},
		warning: `k8s.amazonaws.com/accelerator="": names no GPU model`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ReadCloudLabels(tt.labels)
			if !ok {
				t.Fatal("no cloud labels found")
			}
			if diff := cmp.Diff([]string{tt.warning}, got.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			got.Warnings = nil
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("facts (-want +got):\n%s", diff)
			}
			if n := got.GPUs(3); n < 1 {
				t.Errorf("capacity 3 stands for %d GPUs", n)
			}
		})
	}
}

// Partition and sharing labels alone, and nodes of other clouds, are no cloud GPU signal.
func TestReadCloudLabelsWithoutAccelerator(t *testing.T) {
	for _, labels := range []map[string]string{
		nil,
		{LabelGKEPartitionSize: "1g.5gb", LabelGKEMaxSharedClients: "2"},
		{"cloud.google.com/gke-nodepool": "default-pool", "node.kubernetes.io/instance-type": "g5.xlarge"},
	} {
		if facts, ok := ReadCloudLabels(labels); ok {
			t.Errorf("ReadCloudLabels(%v) = %+v, true; want false", labels, facts)
		}
		if HasCloudAccelerator(labels) {
			t.Errorf("HasCloudAccelerator(%v) = true", labels)
		}
	}
}

// IsCloudGPULabel names exactly the keys ReadCloudLabels reads: a change of any other label
// leaves the facts as they were.
func TestIsCloudGPULabel(t *testing.T) {
	full := map[string]string{
		LabelGKEAccelerator: "nvidia-tesla-a100", LabelGKEPartitionSize: "1g.5gb", LabelGKESharingStrategy: "time-sharing",
		LabelGKEMaxSharedClients: "2", LabelAWSAccelerator: "nvidia-tesla-t4",
		"cloud.google.com/gke-nodepool": "gpu", "cloud.google.com/gke-accelerator-count": "8", "k8s.amazonaws.com/other": "x",
	}
	want, _ := ReadCloudLabels(full)
	kept := map[string]string{}
	for k, v := range full {
		if IsCloudGPULabel(k) {
			kept[k] = v
		}
	}
	got, _ := ReadCloudLabels(kept)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("facts from the kept labels differ (-all +kept):\n%s", diff)
	}
	for _, k := range []string{"cloud.google.com/gke-nodepool", "cloud.google.com/gke-accelerator-count", "nvidia.com/gpu.product"} {
		if IsCloudGPULabel(k) {
			t.Errorf("IsCloudGPULabel(%q) = true", k)
		}
	}
}

// Whatever the label values, reading them never panics and the count never divides by zero.
func FuzzReadCloudLabels(f *testing.F) {
	f.Add("nvidia-tesla-a100", "1g.5gb", "time-sharing", "3", int64(7))
	f.Add("", "g.gb", "mps", "-1", int64(-1))
	f.Add("nvidia-h200-141gb", "1g.0gb", "", "1024", int64(1<<62))
	f.Fuzz(func(t *testing.T, accelerator, size, strategy, clients string, capacity int64) {
		facts, ok := ReadCloudLabels(map[string]string{LabelGKEAccelerator: accelerator, LabelGKEPartitionSize: size,
			LabelGKESharingStrategy: strategy, LabelGKEMaxSharedClients: clients})
		if !ok {
			t.Fatal("accelerator label not found")
		}
		if facts.PartitionsPerGPU < 1 || facts.PartitionsPerGPU > 7 {
			t.Errorf("PartitionsPerGPU %d", facts.PartitionsPerGPU)
		}
		if n := facts.GPUs(capacity); n < 0 || n > max(capacity, 0) {
			t.Errorf("capacity %d stands for %d GPUs", capacity, n)
		}
	})
}
