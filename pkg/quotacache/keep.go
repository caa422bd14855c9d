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

package quotacache

import (
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// deviceClassSuffix ends the name of a DRA per-DeviceClass quota and of Kueue's resource for
// a device class: <class>.deviceclass.resource.k8s.io/devices.
const deviceClassSuffix = ".deviceclass.resource.k8s.io/devices"

// isGPU reports whether a resource name counts GPUs or parts of them: the device plugin's
// and MIG resources, or a device class's devices.
func isGPU(name string) bool {
	return allocation.IsGPUResource(name) || strings.HasSuffix(name, deviceClassSuffix) && len(name) > len(deviceClassSuffix)
}

// KeepQuotaKey reports whether a ResourceQuota's key limits GPUs: requests.<GPU resource>,
// <GPU resource> (a quota without the prefix also limits requests) or
// <class>.deviceclass.resource.k8s.io/devices.
func KeepQuotaKey(key corev1.ResourceName) bool {
	name := strings.TrimPrefix(string(key), "requests.")
	return isGPU(name)
}

// KeepQueueResource reports whether a Kueue quota's resource is kept: every resource but the
// native ones (cpu, memory, pods, hugepages-*, *kubernetes.io/*). Kueue can name a DRA device
// class's devices with any name of its configuration (deviceClassMappings), which the cache
// cannot read, so an extended resource that is not known as a GPU's is kept too.
func KeepQueueResource(name corev1.ResourceName) bool {
	s := string(name)
	if isGPU(s) {
		return true
	}
	domain, _, ok := strings.Cut(s, "/")
	return ok && domain != "kubernetes.io" && !strings.HasSuffix(domain, ".kubernetes.io")
}

// value is a quantity in its resource's unit (resource.Quantity.Value(): fractions round
// up), saturated at the int64 bounds: a quota of "1e30" stays larger than any hardware, for
// the model to report. A string that is not a quantity, or is kubeproto.AbsurdQuantity, is
// math.MaxInt64 when it names a positive amount as far as can be told, and ok is false.
func value(v any) (n int64, ok bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case float64:
		return quantityValue(strconv.FormatFloat(v, 'g', -1, 64))
	case string:
		return quantityValue(v)
	}
	return 0, false
}

func quantityValue(s string) (int64, bool) {
	if kubeproto.AbsurdQuantity(s) {
		if strings.HasPrefix(s, "-") {
			return math.MinInt64, false
		}
		return math.MaxInt64, false
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, false
	}
	return saturated(q), true
}

var (
	maxInt64 = resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
	minInt64 = resource.NewQuantity(math.MinInt64, resource.DecimalSI)
)

// saturated is q.Value() held within the int64 bounds.
func saturated(q resource.Quantity) int64 {
	switch {
	case q.Cmp(*maxInt64) > 0:
		return math.MaxInt64
	case q.Cmp(*minInt64) < 0:
		return math.MinInt64
	}
	return q.Value()
}
