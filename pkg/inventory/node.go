package inventory

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// Warning is a label value that could not be read. The node is still listed; the field that
// the label feeds is left at its zero value.
type Warning struct {
	Node   string
	Label  string
	Value  string
	Reason string
}

func (w Warning) String() string {
	return fmt.Sprintf("node %s: label %s=%q ignored: %s", w.Node, w.Label, w.Value, w.Reason)
}

// IsGPUNode reports whether a node carries an NVIDIA GPU, or did: GPU Feature Discovery's
// labels vanish when a node goes NotReady, but the GPU Operator's nvidia.com/gpu.deploy.* and
// nvidia.com/gpu.workload.config labels, NFD's PCI labels and the kubelet's extended-resource
// capacity survive.
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
	capacity, ok := node.Status.Capacity[ResourceGPU]
	return ok && capacity.Sign() > 0
}

// IsReady reports whether the node's Ready condition is True; False, Unknown and a missing
// condition all mean not ready.
func IsReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Entry reads one GPU node's inventory entry from its labels and status. Malformed label
// values never fail: the field stays zero and a Warning says what was ignored.
func Entry(node *corev1.Node) (homelabv1.GpuNode, []Warning) {
	var warnings []Warning
	warn := func(label, value, reason string) {
		warnings = append(warnings, Warning{Node: node.Name, Label: label, Value: value, Reason: reason})
	}
	entry := homelabv1.GpuNode{
		Name:           node.Name,
		Ready:          IsReady(node),
		Product:        node.Labels[LabelProduct],
		WorkloadConfig: node.Labels[LabelWorkloadConfig],
	}
	if entry.WorkloadConfig == "" {
		entry.WorkloadConfig = homelabv1.DefaultWorkloadConfig
	}
	if value, ok := node.Labels[LabelCount]; ok {
		if n, err := parseNonNegative(value, 32); err != nil {
			warn(LabelCount, value, err.Error())
		} else {
			entry.GpuCount = int32(n)
		}
	}
	if value, ok := node.Labels[LabelMemory]; ok {
		if n, err := parseNonNegative(value, 64); err != nil {
			warn(LabelMemory, value, err.Error())
		} else {
			entry.GpuMemoryMiB = n
		}
	}
	return entry, warnings
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
