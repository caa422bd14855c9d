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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/kubeproto"
)

// The status fields the scheduling keep-rule adds (DecodeSchedulingPod): what PodRequests
// reads of a running pod's resources, its start and conditions, its claims' statuses.

// schedulingStatus reads the field at m of a PodStatus that the scheduling keep-rule adds.
func (r *reader) schedulingStatus(m *kubeproto.Message, st *corev1.PodStatus) error {
	switch m.Tag() {
	case kubeproto.Bytes(statusConditions):
		return appendCondition(&st.Conditions, m.Value())
	case kubeproto.Bytes(statusStartTime):
		st.StartTime = &metav1.Time{}
		return st.StartTime.Unmarshal(m.Value())
	case kubeproto.Bytes(statusContainers):
		return r.containerStatus(m.Value(), &st.ContainerStatuses)
	case kubeproto.Bytes(statusInitContainers):
		return r.containerStatus(m.Value(), &st.InitContainerStatuses)
	case kubeproto.Bytes(statusClaims):
		if err := r.take(); err != nil {
			return err
		}
		st.ResourceClaimStatuses = append(st.ResourceClaimStatuses, corev1.PodResourceClaimStatus{})
		return st.ResourceClaimStatuses[len(st.ResourceClaimStatuses)-1].Unmarshal(m.Value())
	case kubeproto.Bytes(statusAllocatedResources):
		return r.addGPUResource(&st.AllocatedResources, m.Value())
	case kubeproto.Bytes(statusResources):
		if st.Resources == nil {
			st.Resources = &corev1.ResourceRequirements{}
		}
		return r.resources(m.Value(), st.Resources)
	}
	return nil
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

// containerStatus appends a container status's name, allocated and actual resources to list.
func (r *reader) containerStatus(b []byte, list *[]corev1.ContainerStatus) error {
	if err := r.take(); err != nil {
		return err
	}
	var s corev1.ContainerStatus
	m := kubeproto.NewMessage(b)
	for m.Next() {
		var err error
		switch m.Tag() {
		case kubeproto.Bytes(containerStatusName):
			s.Name = string(m.Value())
		case kubeproto.Bytes(containerStatusAllocated):
			err = r.addGPUResource(&s.AllocatedResources, m.Value())
		case kubeproto.Bytes(containerStatusResources):
			if s.Resources == nil {
				s.Resources = &corev1.ResourceRequirements{}
			}
			err = r.resources(m.Value(), s.Resources)
		}
		if err != nil {
			return err
		}
	}
	*list = append(*list, s)
	return m.Err()
}
