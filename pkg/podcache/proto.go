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

package podcache

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// Field numbers of the protobuf messages the decoder reads (k8s.io/api core/v1 and
// k8s.io/apimachinery generated.proto): part of the API's compatibility guarantee.
const (
	podMetadata = 1
	podSpec     = 2
	podStatus   = 3

	metaName              = 1
	metaNamespace         = 3
	metaUID               = 5
	metaResourceVersion   = 6
	metaCreationTimestamp = 8
	metaAnnotations       = 12

	specContainers     = 2
	specNodeSelector   = 7
	specNodeName       = 10
	specAffinity       = 18
	specInitContainers = 20
	specOverhead       = 32

	containerResources     = 8
	containerRestartPolicy = 24
	resourcesLimits        = 1
	resourcesRequests      = 2

	affinityNodeAffinity   = 1
	nodeAffinityRequired   = 1 // requiredDuringSchedulingIgnoredDuringExecution
	selectorTerms          = 1 // NodeSelector.nodeSelectorTerms
	termMatchExpressions   = 1
	requirementKey         = 1
	requirementOperator    = 2
	requirementValues      = 3
	statusPhase            = 1
	statusExtendedResource = 18 // extendedResourceClaimStatus
)

// DecodePod decodes a protobuf v1 Pod (the message, without the envelope) into what
// allocation keeps of it: allocation.FromPod of the pod, reading only the fields FromPod
// reads. It first looks for a GPU resource in the containers', init containers' and
// overhead's resource names without allocating; a pod that names none is nil, nil, and
// nothing else of it is decoded. Resource entries other than GPU resources are skipped
// unread. Namespaces, node names, resource names, models and requests of one resource are
// interned.
func DecodePod(raw []byte) (*allocation.Pod, error) {
	pod, _, err := decodePod(raw)
	return pod, err
}

// decodePod is DecodePod, with the pod's resourceVersion.
func decodePod(raw []byte) (*allocation.Pod, string, error) {
	gpu, err := namesGPUResource(raw)
	if err != nil || !gpu {
		return nil, "", err
	}
	pod, err := minimalPod(raw)
	if err != nil {
		return nil, "", err
	}
	p := allocation.FromPod(pod)
	if p != nil {
		p.Requests = interned.requestsOf(p.Requests)
	}
	return p, pod.ResourceVersion, nil
}

// namesGPUResource reports whether a Pod message names a GPU resource in a container's or an
// init container's requests or limits, or in its overhead. It allocates nothing; metadata and
// status are skipped unread.
func namesGPUResource(pod []byte) (bool, error) {
	found := false
	inResources := func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if found || typ != protowire.BytesType || (num != resourcesLimits && num != resourcesRequests) {
			return nil
		}
		key, _, err := kubeproto.MapEntry(v)
		found = allocation.IsGPUResource(kubeproto.View(key))
		return err
	}
	inContainer := func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if found || num != containerResources || typ != protowire.BytesType {
			return nil
		}
		return kubeproto.Fields(v, inResources)
	}
	inSpec := func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if found || typ != protowire.BytesType {
			return nil
		}
		switch num {
		case specContainers, specInitContainers:
			return kubeproto.Fields(v, inContainer)
		case specOverhead:
			key, _, err := kubeproto.MapEntry(v)
			found = allocation.IsGPUResource(kubeproto.View(key))
			return err
		}
		return nil
	}
	err := kubeproto.Fields(pod, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if found || num != podSpec || typ != protowire.BytesType {
			return nil
		}
		return kubeproto.Fields(v, inSpec)
	})
	return found && err == nil, err
}

// maxElements bounds what minimalPod builds of one pod: containers with GPU resources, GPU
// resource entries, node selector terms, product requirements and their values. Each is a few
// bytes on the wire and a Go value many times larger, so without a bound a hostile message of
// empty entries would take memory many times its size. No real pod comes near it.
const maxElements = 4096

// errTooLarge: a pod beyond maxElements.
var errTooLarge = fmt.Errorf("more than %d containers with GPU resources, GPU resource entries or node selector terms, requirements and values on the product", maxElements)

// reader decodes one pod's fields for minimalPod, within maxElements.
type reader struct {
	left int
}

// take counts one element built; an error beyond the bound.
func (r *reader) take() error {
	if r.left--; r.left < 0 {
		return errTooLarge
	}
	return nil
}

// minimalPod decodes the fields allocation.FromPod reads, and of resource lists the GPU
// resources only. Containers without GPU resources are left out: FromPod counts none of them.
func minimalPod(b []byte) (*corev1.Pod, error) {
	r := &reader{left: maxElements}
	pod := &corev1.Pod{}
	err := kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case podMetadata:
			return decodeMeta(v, &pod.ObjectMeta)
		case podSpec:
			return r.spec(v, &pod.Spec)
		case podStatus:
			return decodeStatus(v, &pod.Status)
		}
		return nil
	})
	return pod, err
}

func decodeMeta(b []byte, meta *metav1.ObjectMeta) error {
	return kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case metaName:
			meta.Name = string(v)
		case metaNamespace:
			meta.Namespace = interned.intern(kubeproto.View(v))
		case metaUID:
			meta.UID = types.UID(v)
		case metaResourceVersion:
			meta.ResourceVersion = string(v)
		case metaCreationTimestamp:
			return meta.CreationTimestamp.Unmarshal(v)
		}
		return nil
	})
}

func (r *reader) spec(b []byte, spec *corev1.PodSpec) error {
	return kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case specContainers:
			return r.container(v, &spec.Containers)
		case specInitContainers:
			return r.container(v, &spec.InitContainers)
		case specOverhead:
			return r.addGPUResource(&spec.Overhead, v)
		case specNodeName:
			spec.NodeName = interned.intern(kubeproto.View(v))
		case specNodeSelector:
			key, value, err := kubeproto.MapEntry(v)
			if err != nil || kubeproto.View(key) != allocation.ProductLabel {
				return err
			}
			spec.NodeSelector = map[string]string{allocation.ProductLabel: interned.intern(kubeproto.View(value))}
		case specAffinity:
			return r.affinity(v, spec)
		}
		return nil
	})
}

// container reads a container's GPU resources and its restart policy, and adds it to list
// if it has GPU resources.
func (r *reader) container(b []byte, list *[]corev1.Container) error {
	var resources corev1.ResourceRequirements
	var policy []byte
	err := kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case containerResources:
			return kubeproto.Fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				switch {
				case typ != protowire.BytesType:
				case num == resourcesLimits:
					return r.addGPUResource(&resources.Limits, v)
				case num == resourcesRequests:
					return r.addGPUResource(&resources.Requests, v)
				}
				return nil
			})
		case containerRestartPolicy:
			policy = v
		}
		return nil
	})
	if err != nil || len(resources.Limits) == 0 && len(resources.Requests) == 0 {
		return err
	}
	if err := r.take(); err != nil {
		return err
	}
	c := corev1.Container{Resources: resources}
	if policy != nil {
		restart := corev1.ContainerRestartPolicyAlways
		if kubeproto.View(policy) != string(restart) {
			restart = corev1.ContainerRestartPolicy(policy)
		}
		c.RestartPolicy = &restart
	}
	*list = append(*list, c)
	return nil
}

// addGPUResource adds a resource list's entry to list if it is a GPU resource; other
// entries are skipped unread.
func (r *reader) addGPUResource(list *corev1.ResourceList, entry []byte) error {
	key, value, err := kubeproto.MapEntry(entry)
	if err != nil || !allocation.IsGPUResource(kubeproto.View(key)) {
		return err
	}
	if err := r.take(); err != nil {
		return err
	}
	q, err := quantity(value)
	if err != nil {
		return fmt.Errorf("resource %s: %w", key, err)
	}
	if *list == nil {
		*list = corev1.ResourceList{}
	}
	(*list)[corev1.ResourceName(resourceName(kubeproto.View(key)))] = q
	return nil
}

// quantity decodes a resource.Quantity message as its Unmarshal does, refusing strings
// too long to parse safely (kubeproto.Quantity).
func quantity(b []byte) (resource.Quantity, error) {
	var q resource.Quantity
	err := kubeproto.Quantity(b, &q)
	return q, err
}

// affinity reads the required node affinity's terms, and of their match expressions
// those on allocation.ProductLabel: what pins a model.
func (r *reader) affinity(b []byte, spec *corev1.PodSpec) error {
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	affinity := spec.Affinity
	return kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != affinityNodeAffinity || typ != protowire.BytesType {
			return nil
		}
		if affinity.NodeAffinity == nil {
			affinity.NodeAffinity = &corev1.NodeAffinity{}
		}
		return kubeproto.Fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num != nodeAffinityRequired || typ != protowire.BytesType {
				return nil
			}
			na := affinity.NodeAffinity
			if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
				na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
			}
			required := na.RequiredDuringSchedulingIgnoredDuringExecution
			return kubeproto.Fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != selectorTerms || typ != protowire.BytesType {
					return nil
				}
				if err := r.take(); err != nil {
					return err
				}
				required.NodeSelectorTerms = append(required.NodeSelectorTerms, corev1.NodeSelectorTerm{})
				return r.term(v, &required.NodeSelectorTerms[len(required.NodeSelectorTerms)-1])
			})
		})
	})
}

// term reads a node selector term's match expressions on allocation.ProductLabel.
func (r *reader) term(b []byte, term *corev1.NodeSelectorTerm) error {
	return kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != termMatchExpressions || typ != protowire.BytesType {
			return nil
		}
		var key []byte
		if err := kubeproto.Fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num == requirementKey && typ == protowire.BytesType {
				key = v
			}
			return nil
		}); err != nil || kubeproto.View(key) != allocation.ProductLabel {
			return err
		}
		if err := r.take(); err != nil {
			return err
		}
		req := corev1.NodeSelectorRequirement{Key: allocation.ProductLabel}
		err := kubeproto.Fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if typ != protowire.BytesType {
				return nil
			}
			switch num {
			case requirementOperator:
				req.Operator = corev1.NodeSelectorOperator(v)
			case requirementValues:
				if err := r.take(); err != nil {
					return err
				}
				req.Values = append(req.Values, interned.intern(kubeproto.View(v)))
			}
			return nil
		})
		term.MatchExpressions = append(term.MatchExpressions, req)
		return err
	})
}

func decodeStatus(b []byte, status *corev1.PodStatus) error {
	return kubeproto.Fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case statusPhase:
			status.Phase = phaseOf(v)
		case statusExtendedResource:
			// Only whether it is set: the claim it names is counted by the claim cache.
			status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{}
		}
		return nil
	})
}

// phaseOf returns the phase named by v, without allocating for those the API defines.
func phaseOf(v []byte) corev1.PodPhase {
	switch corev1.PodPhase(kubeproto.View(v)) {
	case corev1.PodPending:
		return corev1.PodPending
	case corev1.PodRunning:
		return corev1.PodRunning
	case corev1.PodSucceeded:
		return corev1.PodSucceeded
	case corev1.PodFailed:
		return corev1.PodFailed
	case corev1.PodUnknown:
		return corev1.PodUnknown
	}
	return corev1.PodPhase(v)
}

// podMeta is what the reflector reads of a pod that is not kept.
type podMeta struct {
	resourceVersion, initialEventsEnd string
	namespace, name                   string // only when asked for
}

// readMeta reads what the reflector needs of a pod that is not kept: its resourceVersion
// and, on the watch-list bookmark, the initial-events-end annotation; and its namespace and
// name if withName.
func readMeta(pod []byte, withName bool) (podMeta, error) {
	var meta podMeta
	err := kubeproto.Fields(pod, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != podMetadata || typ != protowire.BytesType {
			return nil
		}
		return kubeproto.Fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if typ != protowire.BytesType {
				return nil
			}
			switch num {
			case metaResourceVersion:
				meta.resourceVersion = string(v)
			case metaNamespace:
				if withName {
					meta.namespace = interned.intern(kubeproto.View(v))
				}
			case metaName:
				if withName {
					meta.name = string(v)
				}
			case metaAnnotations:
				key, value, err := kubeproto.MapEntry(v)
				if err == nil && kubeproto.View(key) == metav1.InitialEventsAnnotationKey {
					meta.initialEventsEnd = string(value)
				}
				return err
			}
			return nil
		})
	})
	return meta, err
}
