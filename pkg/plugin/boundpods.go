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

package plugin

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// Field numbers of the Pod messages (k8s.io/api/core/v1/generated.proto) that readPod reads,
// part of the API's compatibility guarantee.
const (
	podMetadata = 1
	podSpec     = 2
	podStatus   = 3

	podContainers     = 2
	podNodeName       = 10
	podPriority       = 25
	podInitContainers = 20
	podOverhead       = 32
	podClaims         = 39
	podResources      = 40

	containerName          = 1
	containerResources     = 8
	containerRestartPolicy = 24

	statusPhase              = 1
	statusConditions         = 2
	statusStartTime          = 7
	statusContainers         = 8
	statusInitContainers     = 10
	statusClaims             = 15
	statusExtendedClaim      = 18
	statusAllocatedResources = 19
	statusResources          = 20
	containerStatusName      = 1
	containerStatusAllocated = 10
	containerStatusResources = 11
	conditionTypeField       = 1
	conditionReasonField     = 5
	conditionStatusField     = 2
)

// readPod decodes a protobuf Pod as far as capacity.KeepPod and capacity.Usage read it: its
// name, namespace, UID and deletion; node, priority, phase, start and disruption; what
// PodRequests reads (containers' and init containers' names, resources and restart policy,
// overhead, pod-level resources, the resources in the status, a pending resize); its claims
// and their statuses. Images, environment, probes, volumes, labels, annotations and managed
// fields are skipped unread.
func readPod(b []byte) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	var meta kubeproto.ObjectMeta
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(podMetadata):
			err = kubeproto.ReadObjectMeta(m.Value(), nil, &meta)
		case kubeproto.Bytes(podSpec):
			err = readPodSpec(m.Value(), &p.Spec)
		case kubeproto.Bytes(podStatus):
			err = readPodStatus(m.Value(), &p.Status)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := m.Err(); err != nil {
		return nil, err
	}
	p.Name, p.Namespace, p.UID = string(meta.Name), string(meta.Namespace), types.UID(meta.UID)
	if meta.DeletionTimestamp != nil {
		p.DeletionTimestamp = &metav1.Time{}
		if err := p.DeletionTimestamp.Unmarshal(meta.DeletionTimestamp); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func readPodSpec(b []byte, spec *corev1.PodSpec) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(podContainers):
			spec.Containers, err = appendContainer(spec.Containers, m.Value())
		case kubeproto.Bytes(podInitContainers):
			spec.InitContainers, err = appendContainer(spec.InitContainers, m.Value())
		case kubeproto.Bytes(podNodeName):
			spec.NodeName = string(m.Value())
		case kubeproto.Varint(podPriority):
			spec.Priority = ptr.To(int32(m.Varint()))
		case kubeproto.Bytes(podOverhead):
			err = readQuantityEntry(m.Value(), &spec.Overhead)
		case kubeproto.Bytes(podClaims):
			spec.ResourceClaims = append(spec.ResourceClaims, corev1.PodResourceClaim{})
			err = spec.ResourceClaims[len(spec.ResourceClaims)-1].Unmarshal(m.Value())
		case kubeproto.Bytes(podResources):
			if spec.Resources == nil {
				spec.Resources = &corev1.ResourceRequirements{}
			}
			err = spec.Resources.Unmarshal(m.Value())
		}
		if err != nil {
			return err
		}
	}
	return m.Err()
}

// appendContainer reads a container's name, resources and restart policy.
func appendContainer(cs []corev1.Container, b []byte) ([]corev1.Container, error) {
	var c corev1.Container
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(containerName):
			c.Name = string(m.Value())
		case kubeproto.Bytes(containerResources):
			if err := c.Resources.Unmarshal(m.Value()); err != nil {
				return nil, err
			}
		case kubeproto.Bytes(containerRestartPolicy):
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicy(m.Value()))
		}
	}
	return append(cs, c), m.Err()
}

func readPodStatus(b []byte, st *corev1.PodStatus) error {
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(statusPhase):
			st.Phase = corev1.PodPhase(m.Value())
		case kubeproto.Bytes(statusConditions):
			err = appendCondition(&st.Conditions, m.Value())
		case kubeproto.Bytes(statusStartTime):
			st.StartTime = &metav1.Time{}
			err = st.StartTime.Unmarshal(m.Value())
		case kubeproto.Bytes(statusContainers):
			st.ContainerStatuses, err = appendContainerStatus(st.ContainerStatuses, m.Value())
		case kubeproto.Bytes(statusInitContainers):
			st.InitContainerStatuses, err = appendContainerStatus(st.InitContainerStatuses, m.Value())
		case kubeproto.Bytes(statusClaims):
			st.ResourceClaimStatuses = append(st.ResourceClaimStatuses, corev1.PodResourceClaimStatus{})
			err = st.ResourceClaimStatuses[len(st.ResourceClaimStatuses)-1].Unmarshal(m.Value())
		case kubeproto.Bytes(statusExtendedClaim):
			if st.ExtendedResourceClaimStatus == nil {
				st.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{}
			}
			err = st.ExtendedResourceClaimStatus.Unmarshal(m.Value())
		case kubeproto.Bytes(statusAllocatedResources):
			err = readQuantityEntry(m.Value(), &st.AllocatedResources)
		case kubeproto.Bytes(statusResources):
			if st.Resources == nil {
				st.Resources = &corev1.ResourceRequirements{}
			}
			err = st.Resources.Unmarshal(m.Value())
		}
		if err != nil {
			return err
		}
	}
	return m.Err()
}

// appendCondition appends a PodResizePending condition (a pending resize's reason decides what
// the pod requests) or a DisruptionTarget one (preempted or not); the others are skipped.
func appendCondition(conds *[]corev1.PodCondition, b []byte) error {
	var c corev1.PodCondition
	m := kubeproto.NewMessage(b)
	for m.Next() {
		switch m.Tag() {
		case kubeproto.Bytes(conditionTypeField):
			c.Type = corev1.PodConditionType(m.Value())
		case kubeproto.Bytes(conditionStatusField):
			c.Status = corev1.ConditionStatus(m.Value())
		case kubeproto.Bytes(conditionReasonField):
			c.Reason = string(m.Value())
		}
	}
	if c.Type == corev1.PodResizePending || c.Type == corev1.DisruptionTarget {
		*conds = append(*conds, c)
	}
	return m.Err()
}

// appendContainerStatus reads a container status's name and resources.
func appendContainerStatus(ss []corev1.ContainerStatus, b []byte) ([]corev1.ContainerStatus, error) {
	var s corev1.ContainerStatus
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(containerStatusName):
			s.Name = string(m.Value())
		case kubeproto.Bytes(containerStatusAllocated):
			err = readQuantityEntry(m.Value(), &s.AllocatedResources)
		case kubeproto.Bytes(containerStatusResources):
			if s.Resources == nil {
				s.Resources = &corev1.ResourceRequirements{}
			}
			err = s.Resources.Unmarshal(m.Value())
		}
		if err != nil {
			return nil, err
		}
	}
	return append(ss, s), m.Err()
}

// readQuantityEntry reads a map<string, Quantity> entry into list.
func readQuantityEntry(e []byte, list *corev1.ResourceList) error {
	key, value, err := kubeproto.MapEntry(e)
	if err != nil {
		return err
	}
	var q resource.Quantity
	if err := kubeproto.Quantity(value, &q); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if *list == nil {
		*list = corev1.ResourceList{}
	}
	(*list)[corev1.ResourceName(key)] = q
	return nil
}
