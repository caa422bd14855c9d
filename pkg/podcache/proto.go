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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"
	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// Field numbers of the protobuf messages the decoder reads (k8s.io/api core/v1 and
// k8s.io/apimachinery generated.proto): part of the API's compatibility guarantee.
const (
	podMetadata = 1
	podSpec     = 2
	podStatus   = 3

	specContainers      = 2
	specNodeSelector    = 7
	specNodeName        = 10
	specAffinity        = 18
	specSchedulingGates = 38
	specInitContainers  = 20
	specPriority        = 25
	specOverhead        = 32
	specClaims          = 39
	specResources       = 40

	containerName          = 1
	containerResources     = 8
	containerRestartPolicy = 24
	resourcesLimits        = 1
	resourcesRequests      = 2

	affinityNodeAffinity     = 1
	nodeAffinityRequired     = 1 // requiredDuringSchedulingIgnoredDuringExecution
	selectorTerms            = 1 // NodeSelector.nodeSelectorTerms
	termMatchExpressions     = 1
	requirementKey           = 1
	requirementOperator      = 2
	requirementValues        = 3
	statusPhase              = 1
	statusConditions         = 2
	statusStartTime          = 7
	statusContainers         = 8
	statusInitContainers     = 10
	statusClaims             = 15
	statusExtendedResource   = 18 // extendedResourceClaimStatus
	statusAllocatedResources = 19
	statusResources          = 20
	extendedMappings         = 1 // PodExtendedResourceClaimStatus.requestMappings
	mappingResourceName      = 2 // ContainerExtendedResourceRequest.resourceName

	containerStatusName      = 1
	containerStatusAllocated = 10
	containerStatusResources = 11
	conditionTypeField       = 1
	conditionStatusField     = 2
	conditionReasonField     = 5
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
// status are skipped unread. Like the functions it calls, it reads its message to the end
// once it has found one, so that a malformed message is an error wherever the GPU resource is.
func namesGPUResource(pod []byte) (bool, error) {
	found := false
	m := kubeproto.NewMessage(pod)
	for m.Next() {
		if !found && m.Tag() == kubeproto.Bytes(podSpec) {
			var err error
			if found, err = specNamesGPUResource(m.Value()); err != nil {
				return false, err
			}
		}
	}
	return found && m.Err() == nil, m.Err()
}

// specNamesGPUResource is namesGPUResource of a PodSpec message.
func specNamesGPUResource(spec []byte) (bool, error) {
	found := false
	m := kubeproto.NewMessage(spec)
	for m.Next() {
		if found {
			continue
		}
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(specContainers), kubeproto.Bytes(specInitContainers):
			found, err = containerNamesGPUResource(m.Value())
		case kubeproto.Bytes(specOverhead):
			found, err = isGPUEntry(m.Value())
		}
		if err != nil {
			return false, err
		}
	}
	return found, m.Err()
}

// containerNamesGPUResource is namesGPUResource of a Container message.
func containerNamesGPUResource(container []byte) (bool, error) {
	found := false
	m := kubeproto.NewMessage(container)
	for m.Next() {
		if !found && m.Tag() == kubeproto.Bytes(containerResources) {
			var err error
			if found, err = resourcesNameGPUResource(m.Value()); err != nil {
				return false, err
			}
		}
	}
	return found, m.Err()
}

// resourcesNameGPUResource is namesGPUResource of a ResourceRequirements message: its limits
// and requests.
func resourcesNameGPUResource(resources []byte) (bool, error) {
	found := false
	m := kubeproto.NewMessage(resources)
	for m.Next() {
		if found {
			continue
		}
		switch m.Tag() {
		case kubeproto.Bytes(resourcesLimits), kubeproto.Bytes(resourcesRequests):
			var err error
			if found, err = isGPUEntry(m.Value()); err != nil {
				return false, err
			}
		}
	}
	return found, m.Err()
}

// isGPUEntry reports whether a resource list's entry names a GPU resource.
func isGPUEntry(entry []byte) (bool, error) {
	key, _, err := kubeproto.MapEntry(entry)
	return err == nil && allocation.IsGPUResource(kubeproto.View(key)), err
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
	// scheduling is the keep-rule of DecodeSchedulingPod: besides what FromPod reads, what
	// kube-scheduler's accounting of a bound pod reads.
	scheduling bool
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
	r := reader{left: maxElements}
	return r.pod(b)
}

// DecodeSchedulingPod decodes a protobuf Pod as far as kube-scheduler's accounting of a bound
// pod reads it (what capacity.KeepPod keeps and capacity.Requests counts), by the keep-rules
// of DecodePod widened: every container (its name, resources and restart policy) and every
// resource entry; priority, claims, pod-level resources and overhead; of the status the
// phase, start, the PodResizePending and DisruptionTarget conditions, the containers'
// allocated and actual resources and the claims' statuses. Images, environment, probes,
// volumes, labels, annotations and managed fields are skipped unread.
func DecodeSchedulingPod(raw []byte) (*corev1.Pod, error) {
	r := reader{left: maxElements, scheduling: true}
	pod, err := r.pod(raw)
	if err != nil {
		return nil, err
	}
	return pod, nil
}

// pod decodes a Pod message by r's keep-rules.
func (r *reader) pod(b []byte) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	var meta kubeproto.ObjectMeta
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(podMetadata):
			err = kubeproto.ReadObjectMeta(m.Value(), nil, &meta)
		case kubeproto.Bytes(podSpec):
			err = r.spec(m.Value(), &pod.Spec)
		case kubeproto.Bytes(podStatus):
			err = r.status(m.Value(), &pod.Status)
		}
		if err != nil {
			return pod, err
		}
	}
	if err := m.Err(); err != nil {
		return pod, err
	}
	pod.Namespace = interned.intern(kubeproto.View(meta.Namespace))
	return pod, kubeproto.SetObjectMeta(&pod.ObjectMeta, &meta, podMeta)
}

// gated stands for a pod's scheduling gates: FromPod reads only whether there are any.
var gated = []corev1.PodSchedulingGate{{}}

// podMeta is what FromPod reads of the pod's metadata but the namespace, which minimalPod
// interns.
const podMeta = kubeproto.MetaName | kubeproto.MetaUID | kubeproto.MetaResourceVersion |
	kubeproto.MetaCreationTimestamp | kubeproto.MetaDeletionTimestamp

func (r *reader) spec(b []byte, spec *corev1.PodSpec) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(specContainers):
			err = r.container(m.Value(), &spec.Containers)
		case kubeproto.Bytes(specInitContainers):
			err = r.container(m.Value(), &spec.InitContainers)
		case kubeproto.Bytes(specOverhead):
			err = r.addGPUResource(&spec.Overhead, m.Value())
		case kubeproto.Bytes(specNodeName):
			spec.NodeName = interned.intern(kubeproto.View(m.Value()))
		case kubeproto.Bytes(specNodeSelector):
			err = nodeSelector(m.Value(), spec)
		case kubeproto.Bytes(specAffinity):
			err = r.affinity(m.Value(), spec)
		case kubeproto.Bytes(specSchedulingGates):
			// Only whether there are any.
			if len(spec.SchedulingGates) == 0 {
				spec.SchedulingGates = gated
			}
		default:
			if r.scheduling {
				err = r.schedulingSpec(&m, spec)
			}
		}
		if err != nil {
			return err
		}
	}
	return m.Err()
}

// schedulingSpec reads the field at m of a PodSpec that the scheduling keep-rule adds.
func (r *reader) schedulingSpec(m *kubeproto.Message, spec *corev1.PodSpec) error {
	switch m.Tag() {
	case kubeproto.Varint(specPriority):
		spec.Priority = ptr.To(int32(m.Varint()))
	case kubeproto.Bytes(specClaims):
		if err := r.take(); err != nil {
			return err
		}
		spec.ResourceClaims = append(spec.ResourceClaims, corev1.PodResourceClaim{})
		return spec.ResourceClaims[len(spec.ResourceClaims)-1].Unmarshal(m.Value())
	case kubeproto.Bytes(specResources):
		if spec.Resources == nil {
			spec.Resources = &corev1.ResourceRequirements{}
		}
		return r.resources(m.Value(), spec.Resources)
	}
	return nil
}

// nodeSelector reads a node selector's entry: the product label's only.
func nodeSelector(entry []byte, spec *corev1.PodSpec) error {
	key, value, err := kubeproto.MapEntry(entry)
	if err != nil || kubeproto.View(key) != allocation.ProductLabel {
		return err
	}
	spec.NodeSelector = map[string]string{allocation.ProductLabel: interned.intern(kubeproto.View(value))}
	return nil
}

// container reads a container's GPU resources and its restart policy, and adds it to list
// if it has GPU resources; by the scheduling keep-rule, its name and every resource, and it
// is added whatever it asks for.
func (r *reader) container(b []byte, list *[]corev1.Container) error {
	var resources corev1.ResourceRequirements
	var policy, name []byte
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(containerName):
			name = m.Value()
		case kubeproto.Bytes(containerResources):
			if err := r.resources(m.Value(), &resources); err != nil {
				return err
			}
		case kubeproto.Bytes(containerRestartPolicy):
			policy = m.Value()
		}
	}
	if err := m.Err(); err != nil || !r.scheduling && len(resources.Limits) == 0 && len(resources.Requests) == 0 {
		return err
	}
	if err := r.take(); err != nil {
		return err
	}
	c := corev1.Container{Resources: resources}
	if r.scheduling {
		c.Name = string(name)
	}
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

// resources reads the GPU entries of a ResourceRequirements message's limits and requests.
func (r *reader) resources(b []byte, resources *corev1.ResourceRequirements) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(resourcesLimits):
			err = r.addGPUResource(&resources.Limits, m.Value())
		case kubeproto.Bytes(resourcesRequests):
			err = r.addGPUResource(&resources.Requests, m.Value())
		}
		if err != nil {
			return err
		}
	}
	return m.Err()
}

// addGPUResource adds a resource list's entry to list if it is a GPU resource (any, by the
// scheduling keep-rule); other entries are skipped unread.
func (r *reader) addGPUResource(list *corev1.ResourceList, entry []byte) error {
	key, value, err := kubeproto.MapEntry(entry)
	if err != nil || !r.scheduling && !allocation.IsGPUResource(kubeproto.View(key)) {
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
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() != kubeproto.Bytes(affinityNodeAffinity) {
			continue
		}
		if affinity.NodeAffinity == nil {
			affinity.NodeAffinity = &corev1.NodeAffinity{}
		}
		if err := r.nodeAffinity(m.Value(), affinity.NodeAffinity); err != nil {
			return err
		}
	}
	return m.Err()
}

// nodeAffinity reads a NodeAffinity message's required node selector.
func (r *reader) nodeAffinity(b []byte, na *corev1.NodeAffinity) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() != kubeproto.Bytes(nodeAffinityRequired) {
			continue
		}
		if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
		}
		if err := r.selector(m.Value(), na.RequiredDuringSchedulingIgnoredDuringExecution); err != nil {
			return err
		}
	}
	return m.Err()
}

// selector reads a NodeSelector message's terms.
func (r *reader) selector(b []byte, selector *corev1.NodeSelector) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() != kubeproto.Bytes(selectorTerms) {
			continue
		}
		if err := r.take(); err != nil {
			return err
		}
		selector.NodeSelectorTerms = append(selector.NodeSelectorTerms, corev1.NodeSelectorTerm{})
		if err := r.term(m.Value(), &selector.NodeSelectorTerms[len(selector.NodeSelectorTerms)-1]); err != nil {
			return err
		}
	}
	return m.Err()
}

// term reads a node selector term's match expressions on allocation.ProductLabel.
func (r *reader) term(b []byte, term *corev1.NodeSelectorTerm) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() != kubeproto.Bytes(termMatchExpressions) {
			continue
		}
		key, err := requirementKeyOf(m.Value())
		if err != nil {
			return err
		}
		if kubeproto.View(key) != allocation.ProductLabel {
			continue
		}
		if err := r.take(); err != nil {
			return err
		}
		req := corev1.NodeSelectorRequirement{Key: allocation.ProductLabel}
		err = r.requirement(m.Value(), &req)
		term.MatchExpressions = append(term.MatchExpressions, req)
		if err != nil {
			return err
		}
	}
	return m.Err()
}

// requirementKeyOf is the key of a NodeSelectorRequirement message.
func requirementKeyOf(b []byte) ([]byte, error) {
	var key []byte
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() == kubeproto.Bytes(requirementKey) {
			key = m.Value()
		}
	}
	return key, m.Err()
}

// requirement reads a NodeSelectorRequirement message's operator and values.
func (r *reader) requirement(b []byte, req *corev1.NodeSelectorRequirement) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(requirementOperator):
			req.Operator = corev1.NodeSelectorOperator(m.Value())
		case kubeproto.Bytes(requirementValues):
			if err := r.take(); err != nil {
				return err
			}
			req.Values = append(req.Values, interned.intern(kubeproto.View(m.Value())))
		}
	}
	return m.Err()
}

func (r *reader) status(b []byte, status *corev1.PodStatus) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(statusPhase):
			status.Phase = phaseOf(m.Value())
		case kubeproto.Bytes(statusExtendedResource):
			if status.ExtendedResourceClaimStatus == nil {
				status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{}
			}
			if r.scheduling {
				err = status.ExtendedResourceClaimStatus.Unmarshal(m.Value())
			} else {
				// Only the resources it maps: the claim it names is counted by the claim cache.
				err = decodeExtendedStatus(m.Value(), status.ExtendedResourceClaimStatus)
			}
		default:
			if r.scheduling {
				err = r.schedulingStatus(&m, status)
			}
		}
		if err != nil {
			return err
		}
	}
	return m.Err()
}

// decodeExtendedStatus reads the resource names of a PodExtendedResourceClaimStatus's
// request mappings.
func decodeExtendedStatus(b []byte, st *corev1.PodExtendedResourceClaimStatus) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		if m.Tag() != kubeproto.Bytes(extendedMappings) {
			continue
		}
		mapping := kubeproto.NewMessage(m.Value())
		var name string
		for mapping.Next() {
			if mapping.Tag() == kubeproto.Bytes(mappingResourceName) {
				name = interned.intern(kubeproto.View(mapping.Value()))
			}
		}
		if err := mapping.Err(); err != nil {
			return err
		}
		st.RequestMappings = append(st.RequestMappings, corev1.ContainerExtendedResourceRequest{ResourceName: name})
	}
	return m.Err()
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

// readMeta reads the metadata of a Pod message into meta, for a pod that is not kept: the
// reflector reads its resourceVersion and, on the watch-list bookmark, the initial-events-end
// annotation.
func readMeta(pod []byte, meta *kubeproto.ObjectMeta) error {
	m := kubeproto.NewMessage(pod)
	for m.Next() {
		if m.Tag() == kubeproto.Bytes(podMetadata) {
			if err := kubeproto.ReadObjectMeta(m.Value(), nil, meta); err != nil {
				return err
			}
		}
	}
	return m.Err()
}
